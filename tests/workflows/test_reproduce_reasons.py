"""Every missing row of `gspdml reproduce` says something true: the preset, loss, pooling,
composed-retrieval method or released checkpoint its reason says the library lacks is indeed
absent (a reason that outlives the piece it names hides a row that could run: the six MS+Metrix
rows of GSP Table 3b, XML Table 1 and Gürbüz thesis Table 5.2b were listed as missing while
``metrix-sop-ms`` and ``metrix-inshop-ms`` existed)."""

import functools
import re

import pytest

from gspdml.cir.evaluation import METHODS as CIR_METHODS
from gspdml.config.loading import preset_names
from gspdml.losses import LOSSES
from gspdml.pooling import POOLINGS
from gspdml.workflows.reproduce import TABLES
from gspdml.workflows.reproduce.registry import Reported, Row, Table, grid
from gspdml.workflows.reproduce.simpool_table import RELEASED, SIMPOOL_TABLE_3_9


def _normal(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


IMPLEMENTED = {_normal(n) for n in (*LOSSES, *POOLINGS, *CIR_METHODS)}
MISSING_ROWS = [(key, row) for key, table in TABLES.items() for row in table.rows if row.missing]


@functools.cache
def _presets() -> frozenset[str]:
    """Every preset's name, listed once (the listing reads the presets folder)."""
    return frozenset(preset_names())


def _lacks_a_preset(row: Row) -> bool:
    return row.candidate is not None and row.candidate in _presets()


def test_no_missing_row_names_a_preset_that_exists():
    wrong = [(key, row.key, row.candidate) for key, row in MISSING_ROWS if _lacks_a_preset(row)]
    assert not wrong


def test_the_check_fails_on_a_reason_that_names_an_existing_preset():
    """The reason of the six MS+Metrix rows before the fix: ``metrix-sop-ms`` exists."""
    (row,) = grid(
        "MS+Metrix =metrix-{dataset}-ms 81.00",
        ("sop",),
        TABLES["xml-table1-conventional"].columns,
        "{dataset}-conventional-{key}",
        {"=metrix-{dataset}-ms@sop": "no MS+Metrix preset for SOP"},
    )
    assert row.missing and row.candidate == "metrix-sop-ms" and _lacks_a_preset(row)


#: "NAME (authors, venue) is not implemented"
NOT_IMPLEMENTED = re.compile(r"^([A-Za-z][\w&+ -]*?) \([^)]*\) is not implemented")


def test_no_missing_row_calls_an_implemented_method_unimplemented():
    claims = {}
    for key, row in MISSING_ROWS:
        found = NOT_IMPLEMENTED.match(row.missing or "")
        if found:
            claims[(key, row.key)] = found.group(1)
        elif "competitor" in (row.missing or "") and "not implemented" in (row.missing or ""):
            claims[(key, row.key)] = row.label.partition("(")[0]  # SEARLE(tuned) -> SEARLE
    assert len(claims) > 20  # HORDE, DiVA, S2SD, DIML, EPSHN, the CIR competitors, ...
    wrong = {where: name for where, name in claims.items() if _normal(name) in IMPLEMENTED}
    assert not wrong
    # the check fails on a claim about a method the library has (the loss "norm_softmax")
    claim = NOT_IMPLEMENTED.match("NormSoftMax (Zhai & Wu, BMVC 2019) is not implemented")
    assert claim and _normal(claim.group(1)) in IMPLEMENTED


def test_a_frozen_row_is_missing_exactly_when_its_checkpoint_was_not_released():
    for row in SIMPOOL_TABLE_3_9.rows:
        released = tuple(row.label.split("/")) in RELEASED
        assert released == (row.frozen is not None) == (row.missing is None), row.key


def test_no_row_is_left_out():
    """A missing line with no printed number is still a row (it used to be dropped)."""
    columns = TABLES["gsp-table3b"].columns
    rows = grid("DiVA diva – – 69.20 –", ("sop", "cub"), columns, "{key}", {"diva": "absent"})
    assert [(r.key, dict(r.paper)) for r in rows] == [
        ("sop/DiVA", {}),
        ("cub/DiVA", {"R@1": Reported(69.2)}),
    ]
    table: Table = TABLES["gsp-table4"]
    collage = [r for r in table.rows if r.dataset == "collage" and "64x128" in r.label]
    assert len(collage) == 4 and all(r.missing and not r.paper for r in collage)


@pytest.mark.parametrize("key", ["gsp-table3b", "xml-table1-conventional", "thesis-table5.2b"])
def test_the_ms_metrix_rows_run_on_every_dataset(key):
    rows = [r for r in TABLES[key].rows if r.label.startswith("MS+Metrix")]
    assert {r.dataset: r.preset for r in rows} == {
        d: f"metrix-{d}-ms" for d in ("cub", "cars", "sop", "inshop")
    }


def test_the_imagenet_rows_are_missing_for_what_is_truly_absent():
    """SimPool Tables 3.2 and 3.3 (protocol ``probe``): a row runs exactly when the released
    file it names loads into gspdml's released models; the ConvNeXt-S files are published
    but no ConvNeXt is built for them, and the supervised release holds the ViT-S models of 100
    epochs only. A supervised row of no released file says why protocol ``classify`` does not
    train it, and each such reason holds: ConvNeXt-S is no registered backbone, the vit
    backbone's default is ViT-S/16 with a [CLS] token that no registered pooling reads, GE is no
    registered pooling, and every other row's network and pooling are registered (so the only
    reason left is the table's protocol)."""
    import inspect

    from gspdml.models.backbones import BACKBONES
    from gspdml.models.backbones.timm_backbone import TimmBackbone, ViT
    from gspdml.models.simpool_release import BASELINES
    from gspdml.workflows.reproduce.classify_spec import ClassifySpec
    from gspdml.workflows.reproduce.simpool_thesis import (
        CONVNEXT,
        NOT_RELEASED_SUPERVISED,
        NOT_TRAINED,
        ONE_PROTOCOL,
        SIMPOOL_TABLE_3_2,
        SIMPOOL_TABLE_3_3,
    )

    assert not any("convnext" in name for name in BASELINES)
    assert not any("convnext" in spec.checkpoint for spec in RELEASED.values())
    assert {key[1:] for key in RELEASED if key[0] == "Supervised"} == {
        ("ViT-S", "Baseline"),
        ("ViT-S", "SimPool"),
    }
    backbones, poolings = set(BACKBONES.names()), set(POOLINGS.names())
    assert not any("convnext" in name for name in backbones)
    assert "convnext" not in inspect.signature(TimmBackbone).parameters["model"].default
    assert "network" in ClassifySpec.__dataclass_fields__
    assert not {"network_options", "backbone_options"} & set(ClassifySpec.__dataclass_fields__)
    defaults = inspect.signature(ViT).parameters
    assert defaults["model"].default == "vit_small_patch16_224"
    assert defaults["class_token"].default is True
    assert not {"cls", "class_token", "ge", "gather_excite"} & poolings
    trainable = {"Baseline": "gap", "CaiT": "class_attention", "Slot": "slot"}
    trainable["SimPool"] = "simpool"
    assert SIMPOOL_TABLE_3_2.protocol == SIMPOOL_TABLE_3_3.protocol == "probe"
    for supervision, table in (("DINO", SIMPOOL_TABLE_3_3), ("Supervised", SIMPOOL_TABLE_3_2)):
        for row in table.rows:
            network, method = row.label.split("/")
            name, _, epochs = method.partition("@")
            spec = RELEASED.get((supervision, network, name)) if epochs in ("", "100") else None
            assert row.frozen == spec, row.key
            if spec is not None:
                continue
            if supervision == "DINO":
                assert row.missing == CONVNEXT
                continue
            given = NOT_RELEASED_SUPERVISED + "; "
            assert row.missing.startswith(given), row.key
            why = row.missing[len(given) :]
            if network in ("ConvNeXt-S", "ViT-B"):  # no such backbone is built
                assert why == NOT_TRAINED[network, None], row.key
            elif network == "ViT-S" and name in ("Baseline", "SimPool"):  # [CLS] or none
                assert why == NOT_TRAINED[network, name], row.key
            elif name == "GE":
                assert why == NOT_TRAINED[None, "GE"], row.key
            else:  # the classify protocol would build its network and pooling
                assert why == ONE_PROTOCOL, row.key
                assert {"ResNet-50": "resnet50", "ViT-S": "vit"}[network] in backbones
                assert trainable[name] in poolings, row.key
