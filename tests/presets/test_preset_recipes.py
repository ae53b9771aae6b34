"""Every shipped preset against a table of the values its paper or its authors' code uses.

A row is ``(preset-name pattern, key, expected value, source)``. ``key`` is a dotted path of the
resolved config, ``data folder`` (the last part of ``data.dataset.root``), ``head`` (where the
projection goes, :func:`~gspdml.models.embedder.head_position`) or ``loss:<attribute path>`` of
the loss the trainer would build. Every preset must match rows of its family, so a new preset
without rows fails, and so does a preset that drifts from its source.

Sources (docs/references.md): "thesis" = the Gürbüz thesis, "GSP paper" = Gürbüz et al., ICCV 2023,
"XML paper" = Gürbüz & Alatan, ICIP 2023, "ProxyNCA++ paper" = Teh et al., ECCV 2020, "Metrix" =
the Psomas thesis, ch. 2; "TF code" = the GSP/CCP authors' TensorFlow
framework, "PNCA code" = the ProxyNCA++ release, "Metrix code" = the Metrix release, "LIBC code" =
the LIBC release (dvl-tum/intra_batch, config/config_*_train.yaml), "GSP LIBC configs" = the GSP
authors' LIBC integration (their PyTorch framework's intra-batch configs).
"""

import functools
import re
from functools import reduce
from pathlib import Path

import pytest

from gspdml.config import DEFAULTS, RunConfig, preset_names
from gspdml.config.loading import read_config
from gspdml.losses import build_loss
from gspdml.losses.ccp import CCP as CCPLoss
from gspdml.models.embedder import head_position
from gspdml.training.component_options import resolved_options
from tests.presets.loaded import preset


class By(dict):
    """An expected value per dataset (cub, cars, sop, inshop)."""


DS = r"(cub|cars|sop|inshop)"
SMALL, LARGE = r"(cub|cars)", r"(sop|inshop)"
SCREEN = r"^cub-screen-(c2|pnca)-[1-8]$"  # thesis Table 5.4: the fractional factorial screening
TF = rf"^({DS}-(fair|ccpfair|conventional)-|ccp-(?!demo)|cub-screen-)"  # the GSP/CCP authors' TF framework
R50 = rf"^{DS}-conventional-r50-"  # the TF framework's conventional recipe on ResNet-50
BNI = (
    rf"^({DS}-(fair|ccpfair|conventional)-(?!r50-)|ccp-(?!demo)|cub-screen-)"  # ... on BN-Inception
)
CONV_BNI = rf"^{DS}-conventional-(?!r50-)"
GSP = rf"^{DS}-(fair|conventional)-.*-gsp$"
PAIR_GSP = rf"^{DS}-(fair-(c2|ms|triplet|c1xbm)|conventional-(r50-\d+-)?c1xbm)(-gemean|-gmp)?-gsp$"
PROXY_GSP = rf"^{DS}-fair-(pnca|pa)(-gemean|-gmp)?-gsp$"
TABLE4 = r"^(cub-fair|cifar-collage)-(c2|pnca)-"  # GSP paper Table 4: the pooling alternatives
COLLAGE4 = r"^cifar-collage-(c2|pnca)-"  # ... its Cifar Collage rows (supplement §2.2 setting)
METRIX = (
    r"^metrix-(?!demo|base)(?!.*-(baseline|ps|imix)$)(?!.*-mochi-)"  # the Metrix presets that mix
)
MOCHI = r"^metrix-.*-contrastive-mochi-"  # the MoCHi competitor rows of Metrix Table 2.4
ONE_LEVEL = r"^metrix-(?!.*-(input-feature|input-embed|feature-embed))"  # not a level combination
#: CCP presets (Gürbüz thesis Ch. 3): fair (ccp-<dataset>-<loss>), with GSP + ZSR
#: (ccp-<dataset>-c1-gsp, thesis Table 5.1) and conventional (thesis Tables 3.2a/b)
CCP_FAIR = r"^ccp-(?!demo|base)(?!.*-gsp$)"
CCP3 = rf"^{DS}-ccpfair-"  # the baselines of thesis Table 3.1, by the Ch. 3 fair recipe
CCP_GSP = rf"^ccp-{DS}-c1-gsp$"
CCP_CONV = rf"^{DS}-conventional-(r50-512-)?(c1|c2|ms)ccp-gap$"
CCP = rf"({CCP_FAIR}|{CCP_GSP}|{CCP_CONV})"
CCP_CODE = rf"(^ccp-(?!demo|base)(?!.*-thesis$)|{CCP_CONV})"  # the options of ccp-dml
NSM = r"^normsoftmax-(cub|cars)"  # NormSoftMax in ProxyNCA++'s protocol (its Tables 12-13)
PNCA = rf"^proxynca-{DS}"  # ProxyNCA++ as published and its ablations (ProxyNCA++ paper Tables 3-7)  # GSP paper Table 4, CUB: the pooling alternatives

TABLE = [
    # --- the TF framework (GSP, CCP): optimiser, clipping, projection ---------------------------
    (TF, "optimizer.name", "adam", "thesis §5.3.4.1: Adam"),
    (
        TF,
        "optimizer.betas",
        [0.9, 0.99],
        "GSP paper supplement §1.1.4, Gürbüz thesis §3.3.2.1 and §5.3.4.1: 'default moment "
        "parameters, beta_1 = .9 and beta_2 = .99' (the text is explicit; TF code: 0.999)",
    ),
    (
        COLLAGE4,
        "optimizer.betas",
        [0.9, 0.99],
        "GSP paper supplement §2.2: 'default Adam', the paper's default moment parameters (.9, .99)",
    ),
    (
        r"^metrix-(?!demo)",
        "optimizer.betas",
        [0.9, 0.999],
        "Metrix code main.py: torch.optim.Adam without betas (torch's default); the thesis names none",
    ),
    (
        TF,
        "optimizer.grad_clip_norm",
        10.0,
        "TF code: default gradient transformers clip the norm at 10",
    ),
    (
        TF,
        "optimizer.grad_clip_value",
        10.0,
        "TF code: default gradient transformers clip values at 10",
    ),
    (BNI, "optimizer.weight_decay", 1e-4, "thesis §5.3.4.1: weight decay 1e-4"),
    (BNI, "model.backbone.name", "bn_inception", "thesis §5.2.4: BN-Inception"),
    (BNI, "model.backbone.freeze_bn", True, "TF code: BNInception freeze_bn = True"),
    (R50, "model.backbone.name", "resnet50", "GSP paper Table 3b / thesis Table 5.2b: ResNet-50"),
    (R50, "optimizer.weight_decay", 4e-4, "thesis §5.3.4.1: weight decay 4e-4 (ResNet50)"),
    (R50, "batch", 112, "thesis §5.3.4.1: batch 112 (ResNet50) at 4 samples per class"),
    (R50, "data.samples_per_class", 4, "thesis §5.3.4.1: 4 samples per class"),
    (rf"{R50}128-", "model.embedding_dim", 128, "thesis Table 5.2b: ResNet50-128"),
    (rf"{R50}512-", "model.embedding_dim", 512, "GSP paper Table 3b: ResNet50-512"),
    (TF, "model.head_bias", False, "TF code: GlobalPooling / GSP feature_transform use_bias=False"),
    # --- fair protocol (thesis §5.3.4.1; §3.3.2.1 for CCP) --------------------------------------
    (
        rf"^{DS}-fair-(?!.*-(otp|vlad)-)",
        "model.embedding_dim",
        128,
        "thesis §5.3.4.1: 128-D fold models",
    ),
    (rf"^{DS}-fair-(?!pa-)", "optimizer.lr", 1e-5, "thesis §5.3.4.1: constant lr 1e-5"),
    (rf"^{SMALL}-fair-pa-", "optimizer.lr", 1e-5, "thesis §5.3.4.1: constant lr 1e-5"),
    (
        rf"^{LARGE}-fair-pa-",
        "optimizer.lr",
        By(sop=5e-6, inshop=1e-5),
        "thesis §5.3.4.1: ProxyAnchor on SOP 5e-6",
    ),
    (rf"^{DS}-fair-", "schedule.plateau", None, "thesis §5.3.4.1: constant learning rate"),
    (
        rf"^{DS}-fair-",
        "data.dataset.val_fold",
        0,
        "thesis §5.3.4.1: one model per 3/4 partition (fold 0 here)",
    ),
    (rf"^{DS}-fair-", "data.dataset.num_folds", 4, "thesis §5.3.4.1: 4 partitions"),
    (rf"^{DS}-fair-", "evaluation.metric", "map_at_r", "thesis §5.3.4.1: validation MAP@R"),
    (
        rf"^{SMALL}-fair-",
        "evaluation.every",
        100,
        "thesis §5.3.4.1: every 100 steps on CUB and Cars",
    ),
    (
        rf"^{LARGE}-fair-",
        "evaluation.every",
        1000,
        "thesis §5.3.4.1: every 1000 steps on SOP and In-shop",
    ),
    (rf"^{SMALL}-fair-", "evaluation.patience", 15, "thesis §5.3.4.1: patience 15 on CUB and Cars"),
    (
        rf"^{LARGE}-fair-",
        "evaluation.patience",
        10,
        "thesis §5.3.4.1: patience 10 on SOP and In-shop",
    ),
    (
        rf"^{DS}-fair-(c1|c2|ms|triplet|c1xbm|c2xbm)-",
        "data.classes_per_batch",
        8,
        "thesis §5.3.4.1: 8 classes x 4",
    ),
    (
        rf"^{DS}-fair-(c1|c2|ms|triplet|c1xbm|c2xbm)-",
        "data.samples_per_class",
        4,
        "thesis §5.3.4.1: 8 classes x 4",
    ),
    (
        rf"^{DS}-fair-(pnca|pa)-",
        "data.classes_per_batch",
        32,
        "thesis §3.3.2.1: proxy losses 32 x 1",
    ),
    (
        rf"^{DS}-fair-(pnca|pa)-",
        "data.samples_per_class",
        1,
        "thesis §3.3.2.1: proxy losses 32 x 1",
    ),
    (
        rf"^{DS}-fair-(pnca|pa)-",
        "loss:lr_multiplier_of_proxies",
        100.0,
        "thesis §3.3.2.1: proxies x100",
    ),
    (rf"^{DS}-fair-pnca-", "optimizer.eps", 1e-8, "thesis: x100 proxies with Adam's usual eps"),
    (rf"^{DS}-fair-pnca-", "loss:temperature_of_pnca", 0.11, "thesis §5.3.4.1: temperature 0.11"),
    # --- conventional protocol (thesis §5.3.4.1) -------------------------------------------------
    (CONV_BNI, "model.embedding_dim", 512, "thesis §5.3.4.1: 512-D"),
    (r"^cub-conventional-", "optimizer.lr", 1e-5, "thesis §5.3.4.1: 1e-5 on CUB"),
    (
        r"^(cars|sop|inshop)-conventional-",
        "optimizer.lr",
        1e-4,
        "thesis §5.3.4.1: 1e-4 on Cars, SOP, In-shop",
    ),
    (
        rf"^{DS}-conventional-",
        "schedule.plateau",
        {"factor": 0.5, "patience": 4, "min_lr": 1e-6, "convention": "keras", "threshold": 1e-3},
        "thesis §5.3.4.1: reduce on plateau, patience 4; TF code: Keras ReduceLROnPlateau, "
        "factor 0.5, min_lr 1e-6, min_delta 1e-3",
    ),
    (CONV_BNI, "data.classes_per_batch", 32, "thesis §5.3.4.1: batch 128 = 32 x 4"),
    (
        rf"^{DS}-conventional-",
        "evaluation.split",
        "test",
        "thesis §5.3.4.1: P@1 monitored on the test split",
    ),
    (
        rf"^{DS}-conventional-",
        "evaluation.metric",
        "precision_at_1",
        "thesis §5.3.4.1: validation P@1",
    ),
    (
        rf"^{SMALL}-conventional-",
        "evaluation.every",
        25,
        "thesis §5.3.4.1: every 25 steps on CUB and Cars",
    ),
    (
        rf"^{LARGE}-conventional-",
        "evaluation.every",
        250,
        "thesis §5.3.4.1: every 250 steps on SOP and In-shop",
    ),
    # --- the fair protocol of thesis Ch. 3: Table 3.1's baselines (<dataset>-ccpfair-*) ------------
    (
        CCP3,
        "evaluation.every",
        By(cub=25, cars=25, sop=250, inshop=250),
        "thesis §3.3.2.1: validation every 25 steps (CUB, Cars), 250 (SOP, In-shop)",
    ),
    (CCP3, "evaluation.patience", 60, "thesis §3.3.2.1: stop after 60 rounds without gain"),
    (CCP3, "evaluation.metric", "map_at_r", "thesis §3.3.2.1: validation MAP@R"),
    (CCP3, "data.dataset.num_folds", 4, "thesis §3.3.2.1: 4 models, one per 3/4 partition"),
    (CCP3, "model.embedding_dim", 128, "thesis §3.3.2.1: embedding dimension 128"),
    (CCP3, "optimizer.lr", 1e-5, "thesis §3.3.2.1: constant 1e-5"),
    (
        rf"^{DS}-ccpfair-pnca-",
        "loss:temperature_of_pnca",
        0.1,
        "thesis §3.3.2.1: ProxyNCA++ temperature 0.1 for all datasets",
    ),
    (
        rf"^{DS}-conventional-.*-gap$",
        "model.pooling.name",
        "gap_gmp",
        "thesis §5.3.4.2: GAP+GMP baseline",
    ),
    # --- pooling placement (issue 15 item 1) ----------------------------------------------------
    (GSP, "head", "local", "GSP paper §4 / TF code: feature_transform (1x1) before the transport"),
    (
        rf"^{DS}-(fair|conventional)-.*-gap$",
        "head",
        "global",
        "TF code GlobalPooling: pool, then Dense",
    ),
    (
        r"^metrix-",
        "head",
        "global",
        "Metrix §2.4.1 / Metrix code: GAP(x)+GMP(x), then Linear(2048, 512)",
    ),
    (
        r"^proxynca-",
        "head",
        "global",
        "ProxyNCA++ paper §3: GMP, LayerNorm, then the embedding layer",
    ),
    (CCP_FAIR, "head", "global", "ccp-dml: GAP then Dense(128) (one operator for GAP)"),
    (
        rf"^{DS}-fair-.*-xml$",
        "head",
        "local",
        "XML paper §2.1: histograms of the projected local features",
    ),
    # --- GSP + ZSR (GSP paper §4.4; thesis §5.3.4.1) ------------------------------------------------
    (GSP, "model.pooling.name", "gsp", "GSP paper"),
    (
        rf"^{SMALL}-(fair|conventional)-.*-gsp$",
        "model.pooling.num_prototypes",
        64,
        "GSP paper §4.4: m = 64 on CUB and Cars",
    ),
    (
        rf"^{LARGE}-(fair|conventional)-.*-gsp$",
        "model.pooling.num_prototypes",
        128,
        "GSP paper §4.4: m = 128 on SOP and In-shop",
    ),
    (GSP, "model.pooling.mu", 0.3, "GSP paper §4.4: mu = 0.3"),
    (PAIR_GSP, "model.pooling.eps", 5.0, "GSP paper §4.4: eps = 5 with pair losses"),
    (PROXY_GSP, "model.pooling.eps", 0.5, "GSP paper §4.4 / TF code: eps = 0.5 with proxy losses"),
    (
        rf"^{DS}-conventional-.*-gsp$",
        "model.pooling.add_max_pool",
        True,
        "TF code: augment_max_pool in the conventional configs",
    ),
    (GSP, "data.halves", True, "GSP paper Alg. 4: class-disjoint halves"),
    (GSP, "loss:mixing", 0.1, "thesis §5.3.4.1: lambda = 0.1"),
    (GSP, "loss:ridge", 0.05, "TF code: regression_regularizer_weight 0.05"),
    (
        GSP,
        "loss:reduction",
        "mean",
        "TF code zsr_loss: one mean over the batch (scripts/zsr_defaults.py)",
    ),
    (GSP, "loss:logit_scale", 9.5, "TF code zsr_loss: softmax scale 9.5"),
    (SCREEN, "model.pooling.name", "gsp", "thesis Table 5.4: GSP"),
    (SCREEN, "loss.name", "zsr", "thesis Table 5.4: lambda is the ZSR weight"),
    (SCREEN, "model.embedding_dim", 128, "thesis §5.3.4.1: tuning at 128-D"),
    # --- base losses -----------------------------------------------------------------------------
    (rf"^{DS}-fair-ms-gsp$", "loss:base.mining", False, "TF code: MS built without a miner"),
    (
        rf"^{DS}-fair-ms-gap$",
        "loss:mining",
        False,
        "TF code: MS built without a miner (the baseline of MS+GSP, so the pair is comparable)",
    ),
    (r"^cub-fair-ms-gap$", "loss:alpha", 2.0, "thesis §3.3.2.1: MS (2, 40, 0.5) on CUB"),
    (rf"^{DS}-fair-c1-gap$", "loss:margin", 0.5, "thesis §3.3.2.1: C1 margin 0.5"),
    (
        rf"^{DS}-fair-triplet-gap$",
        "loss:margin",
        By(cub=0.0961, cars=0.119, sop=0.0451, inshop=0.0451),
        "thesis §3.3.2.1: triplet margins",
    ),
    (r"^cub-fair-ms-gsp$", "loss:base.alpha", 2.0, "thesis §3.3.2.1: MS (2, 40, 0.5) on CUB"),
    (
        r"^cars-fair-ms-gsp$",
        "loss:base.beta",
        75.83,
        "thesis §3.3.2.1: MS (14.35, 75.83, 0.66) on Cars",
    ),
    (r"^cub-fair-c2-gap$", "loss:neg_margin", 0.3841, "thesis §3.3.2.1: C2 (0, 0.3841) on CUB"),
    (
        r"^cars-fair-c2-gsp$",
        "loss:base.pos_margin",
        0.2652,
        "thesis §3.3.2.1: C2 (0.2652, 0.5409) on Cars",
    ),
    (
        rf"^{DS}-fair-triplet-gsp$",
        "loss:base.margin",
        By(cub=0.0961, cars=0.119, sop=0.0451, inshop=0.0451),
        "thesis §3.3.2.1: triplet margins",
    ),
    (
        rf"^{DS}-fair-pa-",
        "loss:alpha_delta_of_pa",
        (32.0, 0.1),
        "thesis §3.3.2.1: ProxyAnchor (delta, alpha) = (0.1, 32)",
    ),
    # --- pooling alternatives (GSP paper Table 2 and Table 4, supplement §1.2 and §1.4) ------------
    (rf"^{DS}-fair-(c2|pnca)-delf$", "model.pooling.name", "delf", "GSP paper Table 2: DeLF"),
    (rf"^{DS}-fair-(c2|pnca)-gemean$", "model.pooling.name", "gem", "GSP paper Table 2: GeMean"),
    (rf"^{DS}-fair-(c2|pnca)-gmp$", "model.pooling.name", "gmp", "GSP paper Table 2: GMP"),
    (
        rf"^{DS}-fair-(c2|pnca)-gmp-gap$",
        "model.pooling.name",
        "gap_gmp",
        "GSP paper Table 2: GMP+GAP",
    ),
    (
        rf"^{DS}-fair-(c2|pnca)-gemean-gsp$",
        "model.pooling.gem_p",
        3.0,
        "GSP paper Table 2: GeMean+GSP; TF code use_gemp (p = 3)",
    ),
    (
        rf"^{DS}-fair-(c2|pnca)-gemean-gsp$",
        "model.pooling.learn_gem_p",
        True,
        "TF code use_gemp: a trainable p",
    ),
    (
        rf"^{DS}-fair-(c2|pnca)-gmp-gsp$",
        "model.pooling.add_max_pool",
        True,
        "GSP paper Table 2: GMP+GSP; TF code augment_max_pool",
    ),
    (rf"^{DS}-fair-c2-gsp-nozsp$", "loss.name", "c2", "GSP paper Table 1 row 2: GSP without ZSP"),
    (rf"^{DS}-fair-c2-gsp-nozsp$", "model.pooling.name", "gsp", "GSP paper Table 1 row 2: GSP"),
    (rf"^{DS}-fair-c2-zsp-mu1$", "loss.name", "zsr", "GSP paper Table 1 row 3: ZSP"),
    (rf"^{DS}-fair-c2-zsp-mu1$", "model.pooling.mu", 1.0, "GSP paper §5.2.3: mu = 1 is GAP"),
    (rf"{TABLE4}cbam$", "model.pooling.name", "cbam", "GSP paper Table 4: CBAM"),
    (rf"{TABLE4}crow$", "model.pooling.name", "crow", "GSP paper Table 4: CroW"),
    (rf"{TABLE4}gemax$", "model.pooling.name", "gemax", "GSP paper Table 4: GeMax"),
    (rf"{TABLE4}gsop$", "model.pooling.name", "gsop", "GSP paper Table 4: GSoP"),
    (rf"{TABLE4}solar$", "model.pooling.name", "solar", "GSP paper Table 4: SOLAR"),
    (rf"{TABLE4}tsmk$", "model.pooling.name", "t_smk", "GSP paper Table 4: T-SMK"),
    (rf"{TABLE4}weldon$", "model.pooling.name", "weldon", "GSP paper Table 4: WELDON"),
    (rf"{TABLE4}otp-", "model.pooling.name", "otp", "GSP paper Table 4: OTP"),
    (rf"{TABLE4}vlad-", "model.pooling.name", "netvlad", "GSP paper Table 4: NetVLAD"),
    (rf"{TABLE4}otp-8x16$", "model.pooling.prototypes", 8, "GSP paper supplement §1.4: 8 x 16"),
    (rf"{TABLE4}otp-64x128$", "model.pooling.dim", 128, "GSP paper supplement §1.4: 64 x 128"),
    (rf"{TABLE4}vlad-8x16$", "model.pooling.clusters", 8, "GSP paper supplement §1.4: 8 x 16"),
    (rf"{TABLE4}vlad-64x128$", "model.pooling.clusters", 64, "GSP paper supplement §1.4: 64 x 128"),
    (
        rf"{TABLE4}(otp|vlad)-",
        "model.embedding_dim",
        None,
        "GSP paper supplement §1.4: the clusters x dim ensemble is the embedding",
    ),
    (COLLAGE4, "data.dataset.name", "collage_cifar", "GSP paper supplement §2.2: Cifar Collage"),
    (COLLAGE4, "model.backbone.name", "resnet20", "GSP paper supplement §2.2: ResNet20"),
    (
        COLLAGE4,
        "model.backbone.weights",
        "resnet20-cifar100",
        "GSP paper supplement §2.2: pretrained on Cifar100 classification",
    ),
    (COLLAGE4, "model.normalize", True, "GSP paper supplement §2.2: l2-normalised embeddings"),
    (COLLAGE4, "optimizer.name", "adam", "GSP paper supplement §2.2: default Adam"),
    (COLLAGE4, "optimizer.lr", 1.0e-3, "GSP paper supplement §2.2: initial learning rate 0.001"),
    (COLLAGE4, "optimizer.weight_decay", 0.0, "GSP paper supplement §2.2: default Adam"),
    (COLLAGE4, "schedule.plateau.factor", 0.5, "GSP paper supplement §2.2: decay factor 0.5"),
    (COLLAGE4, "schedule.plateau.patience", 5, "GSP paper supplement §2.2: patience 5 epochs"),
    (COLLAGE4, "data.classes_per_batch", 16, "GSP paper supplement §2.2: 16 classes a batch"),
    (COLLAGE4, "data.samples_per_class", 4, "GSP paper supplement §2.2: 4 samples a class"),
    (
        COLLAGE4,
        "evaluation.split",
        "val",
        "GSP paper supplement §2.2: validation sub-classes disjoint from training and test",
    ),
    (rf"{COLLAGE4}(?!.*(8x16|gsp)$)", "model.embedding_dim", 128, "GSP paper Table 4: 128D"),
    (rf"{COLLAGE4}(?!gsp$)", "head", "global", "GSP paper Table 4: pool, then project"),
    (r"^cifar-collage-c2-(?!gsp$)", "loss.name", "c2", "GSP paper Table 4: Contrastive"),
    (r"^cifar-collage-pnca-(?!gsp$)", "loss.name", "proxynca_pp", "GSP paper Table 4: ProxyNCA++"),
    (r"^cifar-collage-c2-gsp$", "loss:base.neg_margin", 0.3841, "thesis §3.3.2.1: C2 margins"),
    (r"^cifar-collage-pnca-gsp$", "loss:base.temperature", 0.11, "thesis §5.3.4.1: T = 0.11"),
    (rf"{COLLAGE4}gsp$", "model.pooling.num_prototypes", 128, "GSP paper supplement §2.2: m = 128"),
    (rf"{COLLAGE4}gsp$", "model.pooling.mu", 0.2, "GSP paper supplement §2.2: mu = 0.2"),
    (rf"{COLLAGE4}gsp$", "model.pooling.eps", 10.0, "GSP paper supplement §2.2: eps = 10"),
    (rf"{COLLAGE4}gsp$", "loss:mixing", 0.5, "GSP paper supplement §2.2: lambda = 0.5"),
    (rf"{COLLAGE4}gsp$", "head", "local", "TF code: the 1x1 embedding convolution before GSP"),
    (rf"{COLLAGE4}gap$", "model.pooling.name", "gap", "GSP paper Table 4: GAP"),
    (rf"{COLLAGE4}gmp$", "model.pooling.name", "gmp", "GSP paper Table 4: GMP"),
    (rf"{COLLAGE4}gmp-gap$", "model.pooling.name", "gap_gmp", "GSP paper Table 4: GMP+GAP"),
    (rf"{COLLAGE4}gemean$", "model.pooling.name", "gem", "GSP paper Table 4: GeMean"),
    (rf"{COLLAGE4}delf$", "model.pooling.name", "delf", "GSP paper Table 4: DeLF"),
    (
        rf"^{DS}-fair-softtriple-",
        "batch",
        32,
        "thesis §3.3.2.1: proxy baselines 32 x 1",
    ),
    (
        rf"^{DS}-fair-softtriple-",
        "loss.centers_per_class",
        By(cub=10, cars=10, sop=4, inshop=4),
        "thesis §3.3.2.2: SoftTriple-L, 10 centres per class (CUB, Cars), 4 (SOP, In-shop)",
    ),
    (
        rf"^{DS}-fair-c2xbm-",
        "loss:base.neg_margin",
        By(cub=0.3841, cars=0.5409, sop=0.513, inshop=0.513),
        "thesis §3.3.2.1: C2 margins inside XBM",
    ),
    # --- XBM (thesis §3.3.2.1; TF xbm loss) -----------------------------------------------------------
    (
        rf"^{DS}-(fair-(c1|c2)xbm|conventional-(r50-\d+-)?c1xbm)-",
        "loss:xbm.memory_batches",
        By(cub=25, cars=25, sop=1400, inshop=400),
        "thesis §3.3.2.1 / TF trainModel.py: 25, 25, 1400, 400 batches",
    ),
    (rf"^{DS}-(fair|conventional)-c1xbm-", "loss:xbm.start_step", 1000, "TF code: start_at = 1000"),
    (
        rf"^{DS}-(fair|conventional)-c1xbm-",
        "loss:xbm.fill_before_start",
        True,
        "TF code: enqueue from step 0",
    ),
    # --- XML (XML paper §3) -----------------------------------------------------------------------
    (rf"^{DS}-fair-.*-xml$", "loss:eps", 10.0, "XML paper §3: varepsilon = 10"),
    (rf"^{DS}-fair-.*-xml$", "loss:mixing", 0.01, "XML paper §3: lambda = 0.01"),
    (rf"^{DS}-fair-.*-xml$", "loss:ridge", 0.05, "XML paper §3: epsilon = 0.05"),
    (
        rf"^{SMALL}-fair-.*-xml$",
        "loss:num_prototypes_of_xml",
        64,
        "XML paper §3: m = 64 on CUB and Cars",
    ),
    (
        rf"^{LARGE}-fair-.*-xml$",
        "loss:num_prototypes_of_xml",
        128,
        "XML paper §3: m = 128 on SOP and In-shop",
    ),
    (rf"^{DS}-fair-.*-xml$", "model.pooling.name", "gap", "XML paper: GAP"),
    # --- CCP (thesis §3.2.4, §3.3.2.1) -----------------------------------------------------------
    (
        CCP,
        "model.normalize",
        "clip",
        "thesis §3.2.4 / ccp-dml lipschitz_cont: clip-normalised evaluation",
    ),
    (
        CCP,
        "loss:ccp.normalization",
        "clip",
        "thesis §3.2.4 / ccp-dml lipschitz_cont: clip loss",
    ),
    (
        CCP,
        "loss:ccp.k",
        By(cub=8, cars=8, sop=4, inshop=4),
        "thesis §3.3.2.1: 8 proxies per class on CUB and Cars, 4 on SOP and In-shop",
    ),
    (
        CCP,
        "loss:ccp.pool_size",
        By(cub=12, cars=12, sop=7, inshop=7),
        "thesis §3.3.2.1: pool b = 12 on CUB and Cars, 7 on SOP and In-shop",
    ),
    (CCP, "loss:ccp.prox_lambda", 2e-4, "thesis §3.3.2.1: lambda = 2e-4"),
    (CCP, "loss:ccp.patience", 3, "thesis §3.2.4: a projection ends after 3 rounds"),
    (CCP, "loss:ccp.metric", "map_at_r", "thesis §3.2.4 / ccp-dml monitor_to_stop: MAP@R"),
    (CCP, "loss:ccp.proxy_weight", 1.0, "ccp-dml: ccp_weight 1.0"),
    (
        CCP_CODE,
        "loss:ccp.batch_weight",
        0.1,
        "ccp-dml: loss_weight 0.1 (the in-batch term)",
    ),
    (
        CCP_CODE,
        "loss:ccp.proxy_as_anchor",
        False,
        "ccp-dml: proxies are references (proxy_anchor False)",
    ),
    (r"^ccp-cub-c2-thesis$", "loss:ccp.proxy_as_anchor", True, "thesis §3.2.3: proxy anchors"),
    (r"^ccp-cub-c2-thesis$", "loss:ccp.batch_weight", 0.0, "thesis Eq. 3.2.11: proxies only"),
    (r"^ccp-cub-c2-thesis$", "loss:ccp.regularize_first", True, "thesis Algorithm 1"),
    (r"^ccp-cub-c2-thesis$", "loss:ccp.snapshot", "last", "thesis Algorithm 1: theta* <- theta"),
    (r"^ccp-cub-c2-thesis$", "loss:ccp.init", "random", "thesis Algorithm 1: random samples"),
    (
        rf"^ccp-{DS}-c1(-gsp)?$|^{DS}-conventional-(r50-512-)?c1ccp-",
        "loss:ccp.base.margin",
        0.5,
        "thesis §3.3.2.1: C1 margin 0.5",
    ),
    (
        rf"^ccp-{DS}-c2(-thesis)?$|^{DS}-conventional-(r50-512-)?c2ccp-",
        "loss:ccp.base.pos_margin",
        By(cub=0.0, cars=0.2652, sop=0.2858, inshop=0.2858),
        "thesis §3.3.2.1: C2 (m+, m-)",
    ),
    (
        rf"^ccp-{DS}-c2(-thesis)?$|^{DS}-conventional-(r50-512-)?c2ccp-",
        "loss:ccp.base.neg_margin",
        By(cub=0.3841, cars=0.5409, sop=0.513, inshop=0.513),
        "thesis §3.3.2.1: C2 (m+, m-)",
    ),
    *(
        (
            rf"^ccp-{DS}-ms$|^{DS}-conventional-(r50-512-)?msccp-",
            f"loss:ccp.base.{constant}",
            By(cub=cub, cars=cars, sop=sop, inshop=inshop),
            "thesis §3.3.2.1: MS (alpha, beta, lambda)",
        )
        for constant, cub, cars, sop, inshop in (
            ("alpha", 2.0, 14.35, 2.0, 8.49),
            ("beta", 40.0, 75.83, 40.0, 57.38),
            ("base", 0.5, 0.66, 0.5, 0.41),
        )
    ),
    (
        rf"^ccp-{DS}-ms$|^{DS}-conventional-(r50-512-)?msccp-",
        "loss:ccp.base.mining",
        False,
        "ccp-dml: MS built without a miner",
    ),
    (
        rf"^ccp-{DS}-triplet$",
        "loss:ccp.base.margin",
        By(cub=0.0961, cars=0.119, sop=0.0451, inshop=0.0451),
        "thesis §3.3.2.1: triplet margins",
    ),
    (r"^ccp-(?!demo)", "model.embedding_dim", 128, "thesis §3.3.2.1: 128-D"),
    (r"^ccp-(cub|cars)-", "evaluation.every", 25, "thesis §3.3.2.1: every 25 steps (CUB, Cars)"),
    (r"^ccp-(sop|inshop)-", "evaluation.every", 250, "thesis §3.3.2.1: every 250 (SOP, In-shop)"),
    (r"^ccp-(?!demo)", "evaluation.patience", 60, "thesis §3.3.2.1 / ccp-dml: 60 rounds"),
    (r"^ccp-(?!demo)", "evaluation.metric", "map_at_r", "thesis §3.3.2.1: validation MAP@R"),
    (r"^ccp-(?!demo)", "data.dataset.num_folds", 4, "thesis §3.3.2.1: 4 fold models"),
    (
        CCP_CONV,
        "evaluation.patience",
        By(cub=15, cars=15, sop=10, inshop=10),
        "thesis §3.3.2.1: patience 15 (CUB, Cars), 10 (SOP, In-shop)",
    ),
    (CCP_CONV, "data.dataset.val_fraction", 0.0, "thesis §3.3.2.1: the whole train split"),
    (CCP_GSP, "model.pooling.name", "gsp", "thesis Table 5.1: C1+CCP+GSP"),
    (
        CCP_GSP,
        "model.pooling.num_prototypes",
        By(cub=64, cars=64, sop=128, inshop=128),
        "GSP paper §4.4: m = 64 (CUB, Cars), 128 (SOP, In-shop)",
    ),
    (CCP_GSP, "model.pooling.mu", 0.3, "GSP paper §4.4: mu = 0.3"),
    (CCP_GSP, "model.pooling.eps", 5.0, "GSP paper §4.4: eps = 5 with pair losses (CCP wraps C1)"),
    (CCP_GSP, "head", "local", "GSP paper §4 / TF code: feature_transform before the transport"),
    (CCP_GSP, "data.halves", True, "GSP paper Alg. 4: class-disjoint halves"),
    (CCP_GSP, "loss.name", "zsr", "thesis §5.3.4.1: GSP with zero-shot regularisation"),
    (CCP_GSP, "loss:mixing", 0.1, "thesis §5.3.4.1: lambda = 0.1"),
    (CCP_GSP, "loss:ridge", 0.05, "TF code: regression_regularizer_weight 0.05"),
    (CCP_GSP, "loss:logit_scale", 9.5, "TF code zsr_loss: softmax scale 9.5"),
    (CCP_GSP, "loss:reduction", "mean", "TF code zsr_loss: one mean over the batch"),
    # --- Metrix (Psomas thesis §2.4.1; Metrix code) ------------------------------------------------------
    (r"^metrix-(?!demo)", "model.backbone.name", "resnet50", "Metrix §2.4.1: ResNet-50"),
    (r"^metrix-(?!demo)", "model.pooling.name", "gap_gmp", "Metrix §2.4.1: GAP+GMP"),
    (r"^metrix-(?!demo)(?!.*-128)", "model.embedding_dim", 512, "Metrix §2.4.1: d = 512"),
    (r"^metrix-.*-128", "model.embedding_dim", 128, "Metrix Table 2.6: d = 128 on CUB200"),
    (r"^metrix-(?!demo)", "optimizer.name", "adamw", "Metrix §2.4.1: AdamW"),
    (r"^metrix-(?!demo)", "optimizer.weight_decay", 1e-4, "Metrix §2.4.1: weight decay 1e-4"),
    (
        r"^metrix-(cub|cars)-",
        "data.sampler",
        "random",
        "Metrix code: random batches on CUB and Cars",
    ),
    (r"^metrix-(cub|cars)-", "batch", 100, "Metrix §2.4.1: batch size 100"),
    (r"^metrix-(sop|inshop)-", "batch", 100, "Metrix Table 2.2: balanced 20 x 5"),
    (r"^metrix-(?!demo|base)", "data.dataset.crop", 224, "Metrix §2.4.1: 224 crops"),
    (r"^metrix-(?!demo|base)", "data.dataset.resize", 256, "Metrix §2.4.1: resize 256 at test"),
    (
        r"^metrix-(?!demo|base)",
        "data.dataset.transform",
        "proxynca",
        "Metrix code: Resize(256) of the shorter side, aspect kept (thesis §2.4.1: 256x256; the "
        "code produced Table 2.3; tests/parity/test_metrix_step.py)",
    ),
    (r"^metrix-(?!demo)", "optimizer.betas", [0.9, 0.999], "Metrix code: Adam, no betas passed"),
    (r"^metrix-(?!demo)", "optimizer.grad_clip_value", 10.0, "Metrix code: clip_grad_value_ 10"),
    (r"^metrix-(?!demo)", "optimizer.grad_clip_norm", None, "Metrix code: no norm clipping"),
    (
        r"^metrix-(cub|cars)-",
        "model.backbone.freeze_bn",
        "statistics",
        "Metrix code: --bn_freeze 1, BN affine trained after --warm (parity test)",
    ),
    (
        r"^metrix-(cub|cars)-",
        "schedule.warmup_steps",
        By(cub=290, cars=400),
        "Metrix code: --warm 5 epochs (its default; the README's CUB/Cars commands set none)",
    ),
    (
        r"^metrix-(sop|inshop)-contrastive",
        "schedule.warmup_steps",
        By(sop=2975, inshop=1290),
        "Metrix code: --warm 5 epochs (the README's Metrix commands on SOP/In-shop set none)",
    ),
    (
        r"^metrix-(sop|inshop)-(ms|proxy-anchor|pnca)",
        "schedule.warmup_steps",
        By(sop=595, inshop=258),
        "Metrix code README: --warm 1 for MS and PA on SOP/In-shop (ProxyNCA++ as PA)",
    ),
    (METRIX, "loss:mix_alpha", 2.0, "Metrix §2.4.2: Beta(2, 2)"),
    (METRIX, "loss:mix_weight", 0.4, "Metrix §2.4.2: w = 0.4"),
    (rf"{METRIX}(?!.*-(input|embed))", "loss:level", "feature", "Metrix §2.4.2: feature mixup"),
    (rf"{ONE_LEVEL}.*-input", "loss:level", "input", "Metrix Tables 2.3-2.6: Metrix/input"),
    (rf"{ONE_LEVEL}.*-embed", "loss:level", "embedding", "Metrix Tables 2.3-2.6: Metrix/embed"),
    (
        r"^metrix-.*-input-feature$",
        "loss:level",
        ["input", "feature"],
        "Metrix Tables 2.5-2.6: mixup type combinations {input, feature}",
    ),
    (
        r"^metrix-.*-input-embed$",
        "loss:level",
        ["input", "embedding"],
        "Metrix Tables 2.5-2.6: mixup type combinations {input, embed}",
    ),
    (
        r"^metrix-.*-(?<!input-)feature-embed$",
        "loss:level",
        ["feature", "embedding"],
        "Metrix Tables 2.5-2.6: mixup type combinations {feature, embed}",
    ),
    (
        r"^metrix-.*-input-feature-embed$",
        "loss:level",
        ["input", "feature", "embedding"],
        "Metrix Tables 2.5-2.6: mixup type combinations {input, feature, embed}",
    ),
    (
        r"^metrix-.*-input-feature(-embed)?$",
        "loss:hard_negatives",
        1,
        "Metrix Tables 2.5-2.6: k = {1, all} / {1, all, all} in the combinations with input",
    ),
    (
        r"^metrix-.*-input-embed$",
        "loss:hard_negatives",
        3,
        "Metrix Tables 2.5-2.6: k = {3, all} for {input, embed}",
    ),
    (
        rf"{ONE_LEVEL}.*-input(?!-k)",
        "loss:hard_negatives",
        3,
        "Metrix §2.4.2: k = 3 hard negatives for input mixup",
    ),
    (r"^metrix-.*-input-k1$", "loss:hard_negatives", 1, "Metrix Tables 2.5-2.6: k = 1"),
    (r"^metrix-.*-input-k2$", "loss:hard_negatives", 2, "Metrix Tables 2.5-2.6: k = 2"),
    (
        r"^metrix-.*-feature-k20$",
        "loss:hard_negatives",
        {"feature": 20},
        "Metrix Tables 2.5-2.6: k = 20, feature",
    ),
    (
        r"^metrix-.*-feature-k40$",
        "loss:hard_negatives",
        {"feature": 40},
        "Metrix Tables 2.5-2.6: k = 40, feature",
    ),
    (
        r"^metrix-.*-embed-k20$",
        "loss:hard_negatives",
        {"embedding": 20},
        "Metrix Tables 2.5-2.6: k = 20, embed",
    ),
    (
        r"^metrix-.*-embed-k40$",
        "loss:hard_negatives",
        {"embedding": 40},
        "Metrix Tables 2.5-2.6: k = 40, embed",
    ),
    (r"^metrix-.*-pos-neg$", "loss:pairs", "pos_neg", "Metrix Tables 2.5-2.6: pos-neg pairs"),
    (r"^metrix-.*-anc-neg$", "loss:pairs", "anc_neg", "Metrix Tables 2.5-2.6: anc-neg pairs"),
    (r"^metrix-.*-pos-pos$", "loss:pairs", "pos_pos", "Metrix Tables 2.5-2.6: pos-pos pairs"),
    (MOCHI, "loss.name", "mochi", "Metrix Table 2.4: MoCHi (Kalantidis et al., NeurIPS 2020)"),
    (r"^metrix-.*-imix$", "loss.name", "imix", "Metrix Table 2.4: i-Mix (Lee et al., ICLR 2021)"),
    (r"^metrix-.*-imix$", "loss:level", "input", "Metrix Table 2.4: i-Mix against Metrix/input"),
    (r"^metrix-.*-imix$", "loss:kinds", ("anc_neg",), "Metrix §2.4.4: i-Mix mixes anc-neg pairs"),
    (r"^metrix-.*-imix$", "loss:mix_alpha", 1.0, "i-Mix §4: Beta(1, 1)"),
    (r"^metrix-.*-imix$", "loss:mix_weight", 0.4, "Metrix §2.4.2: w = 0.4"),
    (
        r"^metrix-.*-proxy-anchor-ps$",
        "loss.name",
        "proxy_synthesis",
        "Metrix Table 2.4: ProxyAnchor+PS (Gu et al., AAAI 2021)",
    ),
    (r"^metrix-.*-ps$", "loss:alpha", 0.4, "PS code: ps_alpha 0.40"),
    (r"^metrix-.*-ps$", "loss:mu", 1.0, "PS code: ps_mu 1.0"),
    (
        r"^metrix-.*-ps$",
        "loss:alpha_delta_of_pa",
        (32.0, 0.1),
        "Metrix §2.4.1: PA alpha 32, delta 0.1",
    ),
    (MOCHI, "loss:level", "embedding", "Metrix §2.4.4: MoCHi mixes embeddings only"),
    (f"{MOCHI}neg-neg$", "loss:kinds", ("neg_neg",), "Metrix Table 2.4: MoCHi (neg-neg)"),
    (f"{MOCHI}anc-neg$", "loss:kinds", ("anc_neg",), "Metrix Table 2.4: MoCHi (anc-neg)"),
    (
        MOCHI,
        "loss:hard_by_level",
        {"embedding": 100},
        "Metrix §2.4.4: U-(a) replaced by the k = 100 hardest negatives",
    ),
    (MOCHI, "loss:mix_weight", 0.4, "Metrix §2.4.2: w = 0.4 (the thesis's for its mixing runs)"),
    (
        rf"{METRIX}(?!.*-(pos|anc)-(neg|pos)$)",
        "loss:pairs",
        "random",
        "Metrix §2.4.2: pos-neg or anc-neg, at random per iteration",
    ),
    (r"^metrix-.*-contrastive(-128)?-baseline$", "loss.name", "contrastive", "Metrix Table 2.3"),
    (r"^metrix-.*-ms-baseline$", "loss.name", "ms", "Metrix Table 2.3: MS without Metrix"),
    (
        r"^metrix-.*-proxy-anchor-baseline$",
        "loss.name",
        "proxy_anchor",
        "Metrix Table 2.3: Proxy Anchor without Metrix",
    ),
    (
        r"^metrix-.*-contrastive$",
        "schedule.step_decay.factor",
        By(cub=0.1, cars=0.1, sop=0.25, inshop=0.25),
        "Metrix §2.4.1: decay 0.1 (Cont) on CUB/Cars, 0.25 on SOP/In-shop",
    ),
    (
        r"^metrix-.*-(ms|proxy-anchor)$",
        "schedule.step_decay.factor",
        By(cub=0.5, cars=0.5, sop=0.25, inshop=0.25),
        "Metrix §2.4.1: decay 0.5 for MS and PA on CUB/Cars, 0.25 for all losses on SOP/In-shop",
    ),
    (
        r"^metrix-.*-pnca$",
        "schedule.step_decay.factor",
        By(cub=0.5, cars=0.5, sop=0.25, inshop=0.25),
        "Metrix §2.4.1: 0.25 on SOP/In-shop; CUB/Cars: none given, PA's 0.5 (docs/paper-vs-code.md)",
    ),
    (
        r"^metrix-.*-pnca(-input|-embed)?$",
        "loss:base.mixed_targets",
        "generic",
        "Metrix Eq. 2.9 with Table 2.1's ProxyNCA++ row (docs/paper-vs-code.md)",
    ),
    (
        r"^metrix-.*-pnca-baseline$",
        "loss.name",
        "proxynca_pp",
        "Metrix Table 2.3: ProxyNCA++ without Metrix",
    ),
    (
        r"^metrix-.*-pnca",
        "loss:temperature_of_pnca",
        1 / 9,
        "PNCA code: scale 3 = sqrt(1/T) (the Metrix thesis gives no temperature)",
    ),
    (
        r"^metrix-.*-pnca",
        "loss:lr_multiplier_of_proxies",
        100.0,
        "proxies x100 as the Metrix recipe's PA (docs/paper-vs-code.md)",
    ),
    (
        r"^metrix-.*-ms$",
        "loss:ms_constants",
        (17.97, 75.66, 0.77, 0.39),
        "Metrix code: MS (17.97, 75.66, 0.77), miner 0.39",
    ),
    (
        r"^metrix-(sop|inshop)-(contrastive|ms|proxy-anchor|pnca)$",
        "loss:mix_chunk",
        256,
        "bounded memory at SOP scale (benchmarks/metrix_memory.py)",
    ),
    # --- NormSoftMax as ProxyNCA++ paper Tables 12-13 run it (appendix A; Fig. 6 setting) --------
    (NSM, "loss.name", "norm_softmax", "ProxyNCA++ paper Tables 12-13: NormSoftMax"),
    (NSM, "loss:temperature", 0.5, "ProxyNCA++ paper Tables 12-13: T = 1/2"),
    (NSM, "optimizer.lr", 4e-3, "ProxyNCA++ paper Tables 12-13: 4e-3 backbone and embedding"),
    (rf"{NSM}.*-fast$", "loss:lr_multiplier", 100.0, "Tables 12-13: proxies at 4e-1 (fast)"),
    (rf"{NSM}(?!.*-fast)", "loss:lr_multiplier", 1.0, "Tables 12-13: no fast proxies"),
    (rf"{NSM}-max", "model.pooling.name", "gmp", "Tables 12-13: +max"),
    (rf"{NSM}(?!-max)", "model.pooling.name", "gap", "Tables 12-13: NormSoftMax has no max"),
    (NSM, "model.pooled_norm", None, "ProxyNCA++ paper Fig. 6: NormSoftMax without norm"),
    (NSM, "data.sampler", "random", "ProxyNCA++ paper Fig. 6: NormSoftMax without cbs"),
    (NSM, "model.embedding_dim", 2048, "ProxyNCA++ paper Tables 12-13: embedding size 2048"),
    (NSM, "model.backbone.name", "resnet50", "ProxyNCA++ paper §4.1: ResNet-50"),
    # --- ProxyNCA++ as published (ProxyNCA++ paper §4.1; PNCA code) ----------------------------------
    (r"^proxynca-", "model.backbone.name", "resnet50", "ProxyNCA++ paper §4.1: ResNet-50"),
    (rf"{PNCA}(-no-[a-z-]+)?$", "model.embedding_dim", 2048, "PNCA code: sz_embedding 2048"),
    (
        rf"{PNCA}-512(-crop227)?$",
        "model.embedding_dim",
        512,
        "ProxyNCA++ paper Tables 3-6: Emb 512",
    ),
    (rf"{PNCA}-512-crop227$", "data.dataset.crop", 227, "ProxyNCA++ paper Table 15: 227 crops"),
    (rf"{PNCA}-(?!512-crop227)", "data.dataset.crop", None, "PNCA code: the recipe's 256 crops"),
    (rf"{PNCA}-1024$", "model.embedding_dim", 1024, "ProxyNCA++ paper Tables 3-6: Emb 1024"),
    (rf"{PNCA}(?!.*-no-max)", "model.pooling.name", "gmp", "ProxyNCA++ paper: +max"),
    (rf"{PNCA}-no-max", "model.pooling.name", "gap", "ProxyNCA++ paper Tables 3-7: -max"),
    # each switch of Table 7 is on unless the name says -no-<switch> (Tables 3-10: the original
    # ProxyNCA and the ladders of Tables 8-10 switch several off)
    (rf"{PNCA}(?!.*-no-norm)", "model.pooled_norm", "layer_norm", "ProxyNCA++ paper: +norm"),
    (rf"{PNCA}.*-no-norm", "model.pooled_norm", None, "ProxyNCA++ paper Table 7: -norm"),
    (rf"{PNCA}(?!.*-no-cbs)", "data.sampler", "balanced", "ProxyNCA++ paper: +cbs"),
    (rf"{PNCA}.*-no-cbs", "data.sampler", "random", "ProxyNCA++ paper Table 7: -cbs"),
    (
        rf"{PNCA}(?!.*-no-prob)",
        "loss:assignment_probability",
        True,
        "ProxyNCA++ paper: +prob",
    ),
    (rf"{PNCA}.*-no-prob", "loss:assignment_probability", False, "ProxyNCA++ paper Table 7: -prob"),
    (r"^proxynca-", "optimizer.eps", 1.0, "PNCA code: Adam eps = 1"),
    (r"^proxynca-", "optimizer.weight_decay", 0.0, "PNCA code: weight decay 0"),
    (r"^proxynca-", "optimizer.grad_clip_value", 10.0, "PNCA code: clip_grad_value_(model, 10)"),
    (
        r"^proxynca-",
        "optimizer.lr",
        By(cub=4e-3, cars=4e-3, sop=2.4e-2, inshop=2.4e-2),
        "PNCA code: base lr",
    ),
    (
        rf"{PNCA}(?!.*-no-fast)",
        "loss:lr_multiplier",
        By(cub=1e5, cars=1e5, sop=1e4, inshop=1e5),
        "PNCA code: proxy lr / base lr",
    ),
    (rf"{PNCA}.*-no-fast", "loss:lr_multiplier", 1.0, "ProxyNCA++ paper Tables 3-7: -fast"),
    (rf"{PNCA}(?!.*-no-scale)", "loss:temperature", 1 / 9, "PNCA code: scale 3 = sqrt(1/T)"),
    (rf"{PNCA}.*-no-scale", "loss:temperature", 1.0, "ProxyNCA++ paper Table 7: -scale, T = 1"),
    (
        r"^proxynca-",
        "schedule.plateau.factor",
        0.1,
        "PNCA code: ReduceLROnPlateau default factor 0.1",
    ),
    (r"^proxynca-", "schedule.plateau.patience", 4, "PNCA code: patience 4"),
    (
        r"^proxynca-",
        "schedule.plateau.convention",
        "torch",
        "PNCA code: torch's ReduceLROnPlateau (drops after more than `patience` bad epochs)",
    ),
    (
        r"^proxynca-",
        "schedule.plateau.threshold",
        1e-4,
        "PNCA code: ReduceLROnPlateau's default relative threshold 1e-4",
    ),
    (r"^proxynca-", "schedule.plateau.min_lr", 0.0, "PNCA code: ReduceLROnPlateau's min_lr 0"),
    (
        r"^proxynca-",
        "optimizer.betas",
        [0.9, 0.999],
        "PNCA code: torch.optim.Adam without betas: torch's default (0.9, 0.999)",
    ),
    (
        r"^proxynca-",
        "schedule.fresh_optimizer_after_warmup",
        True,
        "PNCA code train.py: opt_warmup for the warm-up, a new Adam (opt) for the epochs",
    ),
    (
        r"^proxynca-",
        "evaluation.during_warmup",
        False,
        "PNCA code train.py: validation and the plateau step after each main epoch only",
    ),
    (
        r"^proxynca-",
        "schedule.warmup_steps",
        By(cub=5 * 91, cars=5 * 125, sop=5 * 155, inshop=5 * 67),
        "PNCA code: warmup_k 5 epochs (steps per epoch: the train half / batch)",
    ),
    (
        r"^proxynca-",
        "schedule.max_steps",
        By(cub=45 * 91, cars=45 * 125, sop=85 * 155, inshop=85 * 67),
        "PNCA code: 5 warm-up epochs, then nb_epochs (40 on CUB and Cars, 80 on SOP and In-shop)",
    ),
    (
        r"^proxynca-",
        "evaluation.every",
        By(cub=91, cars=125, sop=155, inshop=67),
        "PNCA code: one validation per epoch",
    ),
    (
        r"^proxynca-",
        "data.dataset.num_folds",
        2,
        "PNCA code: train mode on half the training classes",
    ),
    (
        r"^proxynca-",
        "evaluation.metric",
        "precision_at_1",
        "ProxyNCA++ paper §4.1: plateau and best epoch on validation R@1; PNCA code train.py: best chmean = "
        "2 nmi R@1 / (nmi + R@1) with nmi = 1 unless --eval_nmi (not in the README's commands): the R@1 order",
    ),
    (
        r"^proxynca-",
        "evaluation.split",
        "val",
        "ProxyNCA++ paper §4.1: the second half of the training classes validates",
    ),
    (r"^proxynca-(cub|cars)", "batch", 32, "ProxyNCA++ paper Table 1: 8 x 4"),
    (r"^proxynca-(sop|inshop)", "batch", 192, "ProxyNCA++ paper Table 1: 64 x 3"),
    # --- CPU demos: not paper recipes, but wired like the methods -----------------------------------
    (r"^(ccp|metrix)-demo$", "head", "global", "GAP: pool then project (one operator)"),
    (r"^(ccp|metrix)-demo$", "model.backbone.name", "small_cnn", "CPU demo: the small CNN"),
    (r"^(ccp|metrix)-demo$", "data.dataset.name", "collage_digits", "CPU demo: the digits collage"),
    (r"^(ccp|metrix)-demo$", "model.pooling.name", "gap", "CPU demo: GAP"),
    (r"^ccp-demo$", "loss:normalization", "clip", "thesis §3.2.4: CCP's clip normalisation"),
    (r"^metrix-demo$", "loss:level", "feature", "Metrix §2.4.2: feature mixup"),
    (r"^(ccp|metrix)-demo$", "evaluation.metric", "map_at_r", "CPU demo: validation MAP@R"),
    # --- a user's own images (README "Train on your own images") -----------------------------------
    (
        r"^collage-",
        "optimizer.lr",
        1.0e-3,
        "GSP paper supplement §2.2: Adam, initial learning rate 0.001",
    ),
    (
        r"^collage-",
        "schedule.plateau.factor",
        0.5,
        "GSP paper supplement §2.2: reduce on plateau, decay 0.5",
    ),
    (r"^collage-", "schedule.plateau.patience", 5, "GSP paper supplement §2.2: patience 5"),
    (r"^collage-", "data.classes_per_batch", 16, "GSP paper supplement §2.2: 16 classes a batch"),
    (r"^collage-", "data.samples_per_class", 4, "GSP paper supplement §2.2: 4 samples a class"),
    (
        r"^collage-",
        "data.dataset.name",
        "collage_shared",
        "GSP paper supplement §2.2: shared background classes, disjoint across splits",
    ),
    (r"^own-images$", "data.dataset.name", "image_folder", "README: a folder of class folders"),
    (r"^own-images$", "data.dataset.transform", "mlrc", "thesis §3.3: the MLRC augmentation"),
    (r"^own-images$", "model.pooling.name", "gsp", "GSP paper §4: generalized sum pooling"),
    (r"^own-images$", "model.pooling.mu", 0.3, "GSP paper §4.4: mu = 0.3"),
    (r"^own-images$", "model.pooling.eps", 5.0, "GSP paper §4.4: eps = 5 with pair losses"),
    (r"^own-images$", "loss.name", "c2", "thesis Ch. 5: the C2 contrastive loss"),
    (r"^own-images$", "evaluation.metric", "map_at_r", "thesis §5.3.4.1: validation MAP@R"),
    # --- LIBC (Seidenschwarz et al., ICML 2021) and its GSP / XML rows ----------------------------
    # Reported R@1 (ResNet-50, 512-D, conventional): LIBC 70.30 / 88.10 / 81.40 / 92.80 on CUB /
    # Cars / SOP / In-Shop (GSP paper suppl. Table 3b, XML paper Table 1, thesis Table 5.2);
    # LIBC+GSP 70.70 / 88.43 / 81.65 / 93.30 (GSP paper suppl. Table 3b); LIBC+XML 70.49 / 88.38 /
    # 81.48 / 93.04 (XML paper Table 1).
    (r"^libc-", "model.backbone.name", "resnet50", "GSP paper suppl. Table 3b: ResNet-50"),
    (r"^libc-", "model.embedding_dim", 512, "GSP paper suppl. §1.3: 512-D for XBM and LIBC"),
    (r"^libc-", "optimizer.name", "radam", "LIBC code: RAdam"),
    (r"^libc-", "optimizer.betas", [0.9, 0.999], "LIBC code: RAdam's default betas"),
    (r"^libc-", "evaluation.split", "test", "LIBC code: R@1 on the test split every epoch"),
    (r"^libc-", "evaluation.patience", None, "LIBC code: 70 epochs, the best one kept"),
    (r"^libc-", "schedule.step_decay.factor", 0.1, "LIBC code: lr / 10 after epochs 30 and 50"),
    (r"^libc-", "data.dataset.transform", "libc", "LIBC code: GL_orig_RE crop 227 from 256"),
    (r"^libc-[a-z]+(-xml)?$", "model.pooling.name", "gmp", "LIBC code: global max pooling"),
    (
        rf"^libc-{DS}$",
        "batch",
        By(cub=54, cars=70, sop=90, inshop=56),
        "LIBC code: 6x9, 10x7, 15x6, 14x4 classes x samples",
    ),
    (
        rf"^libc-{DS}-gsp$",
        "batch",
        128,
        "GSP LIBC configs: 32 classes x 4 (the code that produced GSP suppl. Table 3b; its text "
        "says LIBC's default settings)",
    ),
    (
        rf"^libc-{DS}-xml$",
        "batch",
        By(cub=54, cars=70, sop=96, inshop=56),
        "XML paper §3: 'following the conventional settings [LIBC]': LIBC's batches (SOP 16 x 6: "
        "the halves need an even class count)",
    ),
    (
        rf"^libc-{DS}-xml$",
        "schedule.max_steps",
        By(cub=7560, cars=8050, sop=43400, inshop=32340),
        "LIBC code: 70 epochs of LIBC's batches",
    ),
    (
        r"^libc-",
        "optimizer.lr",
        By(
            cub=1.563663718906821e-4,
            cars=3.6683239911604993e-4,
            sop=2.472471515853406e-4,
            inshop=1.1265974954242144e-4,
        ),
        "LIBC code: per-dataset lr",
    ),
    (
        r"^libc-",
        "optimizer.weight_decay",
        By(
            cub=6.059722614369727e-6,
            cars=2.551918610962277e-9,
            sop=2.7650277063275255e-13,
            inshop=1.0554824926510768e-7,
        ),
        "LIBC code: per-dataset weight decay",
    ),
    (
        r"^libc-",
        "loss:libc.temperature",
        By(cub=0.2, cars=1 / 9, sop=0.6046908988578005, inshop=0.18591347176280537),
        "LIBC code: temperatur",
    ),
    (r"^libc-", "loss:libc.label_smoothing", 0.1, "LIBC code: lsce / lsgnn, epsilon 0.1"),
    (
        r"^libc-",
        "loss:libc.mpn_layers",
        By(cub=1, cars=2, sop=1, inshop=1),
        "LIBC code: num_layers",
    ),
    (r"^libc-", "loss:libc.mpn_heads", By(cub=2, cars=8, sop=8, inshop=4), "LIBC code: num_heads"),
    (
        r"^libc-",
        "loss:libc.concat_layers",
        By(cub=False, cars=True, sop=False, inshop=False),
        "LIBC code: cat (Cars)",
    ),
    (r"^libc-.*-gsp$", "model.pooling.name", "gsp", "GSP paper suppl. Table 3b: LIBC+GSP"),
    (
        r"^libc-.*-gsp$",
        "model.pooling.num_prototypes",
        By(cub=64, cars=64, sop=128, inshop=128),
        "GSP paper §5: m = 64 (CUB, Cars), 128 (SOP, In-Shop)",
    ),
    (r"^libc-.*-gsp$", "loss.name", "zsr", "GSP LIBC configs: fns lsgnn_lsce_zsr"),
    (r"^libc-.*-gsp$", "loss:mixing", 0.1, "GSP LIBC configs: scaling_zsr 0.1"),
    (r"^libc-.*-xml$", "loss.name", "xml", "XML paper Table 1: LIBC+XML"),
    (r"^libc-.*-xml$", "loss:mixing", 0.01, "XML paper §3: lambda = 0.01"),
    (r"^libc-.*-xml$", "loss:eps", 10.0, "XML paper §3: eps = 10"),
    (
        r"^libc-.*-xml$",
        "loss:num_prototypes_of_xml",
        By(cub=64, cars=64, sop=128, inshop=128),
        "XML paper §3: m = 64 (CUB, Cars), 128 (SOP, In-Shop)",
    ),
    # --- one folder per dataset: `gspdml reproduce --data-root DIR` reads DIR/<folder> for every
    # table, so two families must not name one dataset's folder differently ------------------
    (
        rf"(^|-){DS}(-|$)",
        "data folder",
        By(cub="CUB_200_2011", cars="cars196", sop="Stanford_Online_Products", inshop="InShop"),
        "README, The papers' tables: the --data-root layout",
    ),
]


def dataset_key(name: str) -> str:
    for key in ("inshop", "cars", "cub", "sop"):
        if key in name.split("-"):
            return key
    return ""


class Built:
    """The loss the trainer would build from a preset and its components' resolved options,
    each built once for all the rows of that preset."""

    def __init__(self, config: RunConfig):
        self.config = config

    @functools.cached_property
    def loss(self):
        return build_loss(
            self.config["loss"],
            "loss",
            embedding_dim=self.config["model"]["embedding_dim"] or 8,
            num_classes=10,
        )

    @functools.cached_property
    def options(self):
        return resolved_options(self.config)


def resolve(built: Built, name: str, key: str):
    config = built.config
    if key == "data folder":  # the last part of data.dataset.root (resolved to an absolute path)
        return Path(config["data"]["dataset"]["root"]).name
    if key == "head":
        return head_position(config["model"])
    if key == "batch":
        return config["data"]["classes_per_batch"] * config["data"]["samples_per_class"]
    if key.startswith("loss:"):
        return loss_value(built.loss, key[5:], name)
    for field in ("model.backbone", "model.pooling", "loss"):
        if key.startswith(field + ".") and key != f"{field}.name":
            # an option of a component: the value the run builds it with, defaults included
            options = built.options[field]["options"]
            return reduce(lambda node, part: node[part], key[len(field) + 1 :].split("."), options)
    return reduce(lambda node, part: node[part], key.split("."), config.to_dict())


def loss_value(loss, path: str, name: str):
    """Attributes of the built loss; a few paths name a composite value."""
    if path == "lr_multiplier_of_proxies":
        return float(getattr(loss, "base", loss).lr_multiplier)
    if path == "temperature_of_pnca":
        return getattr(loss, "base", loss).temperature
    if path.startswith("libc."):
        libc, path = (loss if hasattr(loss, "mpn") else loss.base), path[5:]
        if path == "mpn_layers":
            return len(libc.mpn.layers)
        if path == "mpn_heads":
            return libc.mpn.layers[0].attention.num_heads
        return getattr(libc, path)
    if path == "num_prototypes_of_xml":
        return loss.prototypes.shape[0]
    if path == "alpha_delta_of_pa":
        pa = getattr(loss, "base", loss)
        return (float(pa.alpha), float(pa.delta))
    if path == "ms_constants":
        ms = loss.base
        return (ms.alpha, ms.beta, ms.base, ms.epsilon)
    if path.startswith("ccp."):  # the CCP module, alone or inside ZSR
        loss, path = next(m for m in loss.modules() if isinstance(m, CCPLoss)), path[4:]
    if path.startswith("xbm."):
        loss, path = (
            (loss.base if hasattr(loss, "base") and not hasattr(loss, "memory") else loss),
            path[4:],
        )
    return reduce(getattr, path.split("."), loss)


#: the project's own reduced regimes (the demo and its from-scratch variant), not a paper's recipe;
#: tests/workflows/test_demo.py pins that every demo method shares one budget and selection rule
OWN_REGIMES = ("demo-", "scratch-")
PRESETS = [name for name in preset_names() if "/" not in name and not name.startswith(OWN_REGIMES)]


@pytest.mark.parametrize("name", PRESETS)
def test_preset_matches_its_sources(name):
    built = Built(preset(name))
    rows = [
        (key, expected, source)
        for pattern, key, expected, source in TABLE
        if re.search(pattern, name)
    ]
    assert len(rows) >= 5, f"{name}: no table rows cite its sources; add them to TABLE"
    for key, expected, source in rows:
        if isinstance(expected, By):
            expected = expected[dataset_key(name)]
        got = resolve(built, name, key)
        if isinstance(expected, float) and isinstance(got, (int, float)):
            assert got == pytest.approx(expected), (
                f"{name}: {key} = {got!r}, expected {expected!r} ({source})"
            )
        else:
            assert got == expected, f"{name}: {key} = {got!r}, expected {expected!r} ({source})"


def test_every_table_row_is_used():
    unused = [
        (pattern, key)
        for pattern, key, _, _ in TABLE
        if not any(re.search(pattern, n) for n in PRESETS)
    ]
    assert not unused


#: the pre-training recipes that follow a paper (``gspdml/presets/pretrain``): (recipe, key of the
#: loaded recipe, expected value, source)
PRETRAIN_TABLE = [
    (
        "resnet20-cifar100",
        "backbone.name",
        "resnet20",
        "GSP paper supplement §2.2: ResNet20 (3 stages, 3 blocks) for Cifar Collage",
    ),
    (
        "resnet20-cifar100",
        "data.source",
        "cifar100",
        "GSP paper supplement §2.2: pretrained on Cifar100 classification",
    ),
    (
        "resnet20-cifar100",
        "data.augment",
        True,
        "He et al. 2016 §4.2: 4-pixel padding, random 32x32 crop, horizontal flip",
    ),
]


@pytest.mark.parametrize("recipe", sorted({row[0] for row in PRETRAIN_TABLE}))
def test_pretraining_recipe_matches_its_sources(recipe):
    from torch import nn

    from gspdml.models.backbones import build_backbone
    from gspdml.training.pretrain import load_recipe

    loaded = load_recipe(recipe)
    for name, key, expected, source in PRETRAIN_TABLE:
        if name == recipe:
            got = reduce(lambda d, k: d[k], key.split("."), loaded)
            assert got == expected, f"{recipe}: {key} = {got!r}, expected {expected!r} ({source})"
    # He et al. 2016 §4.2: 6n + 2 = 20 weighted layers (n = 3 blocks per stage): 19 3x3
    # convolutions here (the classifier is the 20th), 16/32/64 filters in the three stages
    backbone = build_backbone(loaded["backbone"], in_channels=3)
    convs = [m for m in backbone.modules() if isinstance(m, nn.Conv2d) and m.kernel_size == (3, 3)]
    assert len(convs) == 19
    assert [c.out_channels for c in convs] == [16] * 7 + [32] * 6 + [64] * 6


#: fair-protocol GAP baselines and the +GSP row they are the baseline of (GSP paper Table 2)
GAP_GSP_PAIRS = [
    (name, name[: -len("gap")] + "gsp")
    for name in PRESETS
    if re.search(rf"^{DS}-fair-[a-z0-9]+-gap$", name) and name[: -len("gap")] + "gsp" in PRESETS
]


@pytest.mark.parametrize(("gap", "gsp"), GAP_GSP_PAIRS)
def test_gap_baseline_differs_from_its_gsp_row_only_in_pooling_and_zsr(gap, gsp):
    """A Table 2 pair compares poolings: the GAP row must train exactly as the +GSP row, with
    GAP instead of GSP and the +GSP row's base loss without the zero-shot regulariser."""
    base, treated = preset(gap).to_dict(), preset(gsp).to_dict()
    assert treated["loss"]["name"] == "zsr"
    # the losses as they are built (defaults included: a preset states only what it pins)
    zsr = resolved_options(preset(gsp))["loss"]
    assert resolved_options(preset(gap))["loss"] == zsr["options"]["base"]
    assert base["model"].pop("pooling") == {"name": "gap"}
    assert treated["model"].pop("pooling")["name"] == "gsp"
    for config in (base, treated):
        for key in ("name", "loss"):
            config.pop(key)
        config["data"].pop("halves")
    assert base == treated


def test_every_fair_gsp_row_has_its_gap_baseline():
    gsp_rows = [
        n for n in PRESETS if re.search(rf"^{DS}-fair-(c1xbm|c2|ms|triplet|pnca|pa)-gsp$", n)
    ]
    assert len(gsp_rows) == 24
    assert {gsp for _, gsp in GAP_GSP_PAIRS} == set(gsp_rows)


@pytest.mark.parametrize("name", [n for n in PRESETS if re.search(CCP3, n)])
def test_a_chapter_3_baseline_is_its_chapter_5_preset_with_the_chapter_3_recipe(name):
    """Gürbüz thesis §3.3.2.1 and §5.3.4.1 describe one fair protocol but for the validation
    cadence, the patience, the ProxyNCA++ temperature and ProxyAnchor's learning rate on SOP
    (5e-6 in Ch. 5 only): a Table 3.1 baseline trains as the Ch. 5 preset of its loss in
    everything else (losses, batches, optimiser, warm-up)."""
    assert len([n for n in PRESETS if re.search(CCP3, n)]) == 36  # 9 baselines x 4 datasets
    ch3 = preset(name).to_dict()
    ch5 = preset(name.replace("-ccpfair-", "-fair-")).to_dict()
    for config in (ch3, ch5):
        config.pop("name")
        config["evaluation"].pop("every")
        config["evaluation"].pop("patience")
        if config["loss"]["name"] == "proxynca_pp":
            config["loss"].pop("temperature")
        if name == "sop-ccpfair-pa-gap":
            config["optimizer"].pop("lr")
    assert ch3 == ch5


#: thesis Table 5.4, the 2-level fractional factorial design: run -> (m, mu, eps, lambda)
SCREENING = {
    1: (16, 0.3, 0.5, 0.1),
    2: (16, 0.7, 0.5, 0.5),
    3: (128, 0.3, 0.5, 0.5),
    4: (128, 0.7, 0.5, 0.1),
    5: (16, 0.3, 20.0, 0.5),
    6: (16, 0.7, 20.0, 0.1),
    7: (128, 0.3, 20.0, 0.1),
    8: (128, 0.7, 20.0, 0.5),
}


@pytest.mark.parametrize("loss", ["c2", "pnca"])
def test_screening_presets_are_the_design_of_thesis_table_5_4(loss):
    """Each run differs from the +GSP preset of its loss in the four screened factors only."""
    reference = preset(f"cub-fair-{loss}-gsp").to_dict()
    for run, (m, mu, eps, lam) in SCREENING.items():
        config = preset(f"cub-screen-{loss}-{run}").to_dict()
        pooling, mixing = config["model"].pop("pooling"), config["loss"].pop("mixing")
        assert (pooling["num_prototypes"], pooling["mu"], pooling["eps"], mixing) == (
            m,
            mu,
            eps,
            lam,
        )
        expected = {**reference, "name": config["name"]}
        expected["model"] = {k: v for k, v in reference["model"].items() if k != "pooling"}
        expected["loss"] = {k: v for k, v in reference["loss"].items() if k != "mixing"}
        assert config == expected


#: the optimisers whose moment decays (betas) a recipe must state
ADAM_FAMILY = ("adam", "adamw", "radam")


def test_every_preset_family_states_its_adam_betas():
    """The schema default (0.9, 0.99) decides no recipe: every shipped config that trains with
    Adam, AdamW or RAdam states its betas itself or through its base (a loss fragment, laid over
    a protocol's config, takes that config's optimiser unless it sets more than a learning rate).
    The ProxyNCA++ presets once got 0.99 silently where the code runs torch's 0.999
    (tests/parity/test_proxynca_step.py)."""
    silent = []
    for name in preset_names():
        optimizer = read_config(name, {}).get("optimizer") or {}
        if name.startswith("losses/") and set(optimizer) <= {"lr"}:
            continue
        if optimizer.get("name", DEFAULTS["optimizer"]["name"]) in ADAM_FAMILY:
            if "betas" not in optimizer:
                silent.append(name)
    assert not silent, f"presets that take the schema's default betas: {silent}"
