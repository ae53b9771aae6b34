# The lines of the Metrix release's main.py (billpsomas/metrix b679703) that build the loss, the
# optimiser and the schedule (lines 15-23, 154-200) and run one epoch (lines 208-259), verbatim
# and re-indented into two functions; the data loaders, evaluation and checkpointing are left out.
# [gspdml shim] imports package-relative; `tqdm(enumerate(train_loader))` and the progress bar
# line (233, 261-265) become a plain loop over the batches given; the `.cuda()` calls stay (the
# parity test maps them to the CPU).
import torch
from torch import nn

from .train import *

from pytorch_metric_learning.losses.contrastive_loss import ContrastiveLoss
from pytorch_metric_learning.distances.lp_distance import LpDistance
from pytorch_metric_learning.reducers.avg_non_zero_reducer import AvgNonZeroReducer
from pytorch_metric_learning.reducers.multiple_reducers import MultipleReducers

from pytorch_metric_learning.losses.multi_similarity_loss import MultiSimilarityLoss
from pytorch_metric_learning.miners.multi_similarity_miner import  MultiSimilarityMiner
from pytorch_metric_learning.distances import CosineSimilarity

from pytorch_metric_learning.losses.proxy_anchor_loss import ProxyAnchorLoss


def build(args, model, train_dataset=None):
    # Set loss function
    if args.loss == 'contrastive':
        neg_margin=0.5
        criterion = ContrastiveLoss(neg_margin=neg_margin)
        distance = LpDistance()

        if args.mode == 'baseline':
            reducer_dict = {"pos_loss" : AvgNonZeroReducer(), "neg_loss" : AvgNonZeroReducer()}
            reducer = MultipleReducers(reducer_dict)
    
        elif args.mode == 'input' or args.mode == 'embed' or args.mode == 'feature':
            reducer_dict_pos = {"pos_loss" : AvgNonZeroReducer()}
            reducer_dict_neg = {"neg_loss" : AvgNonZeroReducer()}
            reducer_pos = MultipleReducers(reducer_dict_pos)
            reducer_neg = MultipleReducers(reducer_dict_neg)
    
    elif args.loss == 'multisimilarity':
        alpha = 17.97
        beta = 75.66
        base = 0.77
        criterion = MultiSimilarityLoss(alpha, beta, base)
        
        epsilon=0.39
        miner = MultiSimilarityMiner(epsilon=epsilon)
        
        distance = CosineSimilarity()

        if args.mode == 'baseline':
            reducer_dict = {"loss" : AvgNonZeroReducer()}
            reducer = MultipleReducers(reducer_dict)
    
    elif args.loss == 'proxyanchor':
        criterion = ProxyAnchorLoss(num_classes = train_dataset.nb_classes(), embedding_size = args.embedding_size).cuda()

    # Set parameter groups for optimizer
    param_groups = [
        {'params': list(set(model.parameters()).difference(set(model.model.embedding.parameters()))) if args.gpu_id != -1 else 
                    list(set(model.module.parameters()).difference(set(model.module.model.embedding.parameters())))},
        {'params': model.model.embedding.parameters() if args.gpu_id != -1 else model.module.model.embedding.parameters(), 'lr':float(args.lr) * 1},
    ]
    
    if args.loss == 'proxyanchor':
        param_groups.append({'params': criterion.proxies, 'lr':float(args.lr) * 100})

    # Set optimizer and scheduler
    opt = torch.optim.Adam(param_groups, lr=float(args.lr), weight_decay = args.weight_decay)
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=args.lr_decay_step, gamma = args.lr_decay_gamma)
    return locals()


def run_epoch(args, epoch, model, train_loader, criterion, opt, distance, reducer=None, reducer_pos=None, reducer_neg=None, miner=None, alpha=None, beta=None, base=None, **_):
    model.train()

    if args.bn_freeze:
        modules = model.model.modules() if args.gpu_id != -1 else model.module.model.modules()
        for m in modules: 
            if isinstance(m, nn.BatchNorm2d):
                m.eval()

    losses_per_epoch = []
    
    # Warmup: Train only new params, helps stabilize learning
    if args.warm > 0:
        if args.gpu_id != -1:
            unfreeze_model_param = list(model.model.embedding.parameters()) + list(criterion.parameters())
        else:
            unfreeze_model_param = list(model.module.model.embedding.parameters()) + list(criterion.parameters())

        if epoch == 0:
            for param in list(set(model.parameters()).difference(set(unfreeze_model_param))):
                param.requires_grad = False
        if epoch == args.warm:
            for param in list(set(model.parameters()).difference(set(unfreeze_model_param))):
                param.requires_grad = True

    for batch_idx, (inputs, target) in enumerate(train_loader):

        inputs = inputs.cuda()
        target = target.cuda()  

        if args.loss == 'contrastive':
            if args.mode == 'baseline':
                loss, losses_per_epoch = baseline_contrastive(inputs, target, model, distance, reducer, opt, losses_per_epoch)
            elif args.mode == 'input':
                loss, losses_per_epoch = input_metrix_contrastive(inputs, target, model, distance, criterion, opt, losses_per_epoch, reducer_pos, reducer_neg)
            elif args.mode == 'embed':
                loss, losses_per_epoch = embed_metrix_contrastive(inputs, target, model, distance, criterion, opt, losses_per_epoch, reducer_pos, reducer_neg)
            elif args.mode == 'feature':
                loss, losses_per_epoch = feature_metrix_contrastive(inputs, target, model, distance, criterion, opt, losses_per_epoch, reducer_pos, reducer_neg, args.alpha)
        elif args.loss == 'multisimilarity':
            if args.mode == 'baseline':
                loss, losses_per_epoch = baseline_multisimilarity(inputs, target, model, distance, miner, alpha, beta, base, opt, losses_per_epoch)
            elif args.mode == 'input':
                print('We are sorry, MultiSimilarity + Metrix/input has not been uploaded yet.')
                break
            elif args.mode == 'embed':
                loss, losses_per_epoch = embed_metrix_multisimilarity(inputs, target, model, distance, miner, alpha, beta, base, opt, losses_per_epoch)
        elif args.loss == 'proxyanchor':
            if args.mode == 'baseline':
                loss, losses_per_epoch = baseline_proxyanchor(inputs, target, model, criterion, opt, losses_per_epoch)
    return losses_per_epoch
