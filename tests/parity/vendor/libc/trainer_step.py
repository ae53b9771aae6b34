# The lines of the LIBC release (dvl-tum/intra_batch a1ae3de) that build the model, the losses
# and the optimiser and take one training step, verbatim:
#   net/load_trained_net.py lines 57-76 (the resnet50 branch of load_net), in `load_net`;
#   trainer.py lines 76-94 (the message passing network, the graph generator, RAdam), in
#   `Step.build`; lines 396-431 (get_loss_fn: lsgnn / lsce), in `Step.get_loss_fn`; lines
#   208-239 and 285 (forward_pass, the terms of the released configs: lsce, lsgnn), in
#   `Step.forward_pass`; lines 183-185 (backward, step), in `Step.step`.
# [gspdml shim] imports package-relative; `self.center`, `self.of`, `self.triplet`,
# `self.distill`, `self.of_pre`, `self.distance` (terms no released config switches on) are set
# to None/False in `build`; the ImageNet download is skipped (pretrained=False).
import torch
import torch.nn as nn
from collections import defaultdict

from . import losses
from .RAdam import RAdam
from .net.gnn_base import GNNReID
from .net.graph_generator import GraphGenerator
from .net.resnet import resnet50
from .net.utils import weights_init_kaiming, weights_init_classifier
from types import SimpleNamespace

net = SimpleNamespace(resnet50=resnet50)  # [gspdml shim] the `net` package's name for it


def load_net(dataset, nb_classes, mode, net_type, bn_inception={'embed': 0, 'sz_embedding': 512},
             last_stride=0, neck=0, pretrained_path=None, red=1):
    if net_type == 'resnet50':
        sz_embed = int(2048/red)
        model = net.resnet50(pretrained=False, last_stride=last_stride, neck=neck, red=red)

        dim = int(2048/red)
        if neck:
            model.bottleneck = nn.BatchNorm1d(dim)
            model.bottleneck.bias.requires_grad_(False)  # no shift
            model.fc = nn.Linear(dim, nb_classes, bias=False)

            model.bottleneck.apply(weights_init_kaiming)
            model.fc.apply(weights_init_classifier)
        else: 
            model.fc = nn.Linear(dim, nb_classes)

        if pretrained_path != 'no':
            if not torch.cuda.is_available(): 
                model.load_state_dict(torch.load(pretrained_path, map_location=torch.device('cpu')))
            else:
                model.load_state_dict(torch.load(pretrained_path))
    return model, sz_embed


class Step:
    def __init__(self, config, device):
        self.config, self.device = config, device
        self.center = self.of = self.triplet = self.distill = self.of_pre = self.distance = None
        # trainer.py lines 66-72
        self.encoder, self.sz_embed = load_net(
                self.config['dataset']['dataset_short'],
                self.config['dataset']['num_classes'],
                self.config['mode'],
                **self.config['models']['encoder_params'])

    def build(self):
        sz_embed = self.sz_embed
        self.gnn = GNNReID(self.device, 
                self.config['models']['gnn_params'], 
                sz_embed).to(self.device)
        
        if self.config['models']['gnn_params']['pretrained_path'] != "no": 
            load_dict = torch.load(self.config['models']['gnn_params']['pretrained_path'], 
                    map_location='cpu')
            self.gnn.load_state_dict(load_dict)

        self.graph_generator = GraphGenerator(self.device, **self.config['graph_params'])
        # [gspdml shim] trainer.py lines 86-87 (the evaluator) left out
         
        params = list(set(self.encoder.parameters())) + list(set(self.gnn.parameters()))
        param_groups = [{'params': params,
                         'lr': self.config['train_params']['lr']}]

        self.opt = RAdam(param_groups,
                         weight_decay=self.config['train_params']['weight_decay'])

    def get_loss_fn(self, params, num_classes):
        self.losses = defaultdict(list)
        self.losses_mean = defaultdict(list)
        self.every = self.config['models']['gnn_params']['every']
        
        # GNN loss
        if not self.every: # normal GNN loss
            if 'gnn' in params['fns'].split('_'):
                self.gnn_loss = nn.CrossEntropyLoss().to(self.device)
            elif 'lsgnn' in params['fns'].split('_'):
                self.gnn_loss = losses.CrossEntropyLabelSmooth(
                    num_classes=num_classes, dev=self.device).to(self.device)
            elif 'focalgnn' in params['fns'].split('_'):
                self.gnn_loss = losses.FocalLoss().to(self.device)
            else:
                self.gnn_loss = None
        
        else: # GNN loss after every layer
            if 'gnn' in params['fns'].split('_'):
                self.gnn_loss = [nn.CrossEntropyLoss().to(self.device) for
                        _ in range(self.config['models']['gnn_params']['gnn']['num_layers'])] 
            elif 'lsgnn' in params['fns'].split('_'):
                self.gnn_loss = [losses.CrossEntropyLabelSmooth(
                    num_classes=num_classes, dev=self.gnn_dev).to(self.device) for
                        _ in range(self.config['models']['gnn_params']['gnn']['num_layers'])]

        # CrossEntropy Loss
        if 'lsce' in params['fns'].split('_'):
            self.ce = losses.CrossEntropyLabelSmooth(
                num_classes=num_classes, dev=self.device).to(self.device)
        elif 'focalce' in params['fns'].split('_'):
            self.ce = losses.FocalLoss().to(self.device)
        elif 'ce' in params['fns'].split('_'):
            self.ce = nn.CrossEntropyLoss().to(self.device)
        else:
            self.ce = None

    def forward_pass(self, x, Y, I, P, train_params):
        Y = Y.to(self.device)
        self.opt.zero_grad()
        if self.center:
            self.opt_center.zero_grad()
        
        probs, fc7 = self.encoder(x.to(self.device), output_option=train_params['output_train_enc'])
 
        # Compute CE Loss
        loss = 0
        if self.ce:
            loss0 = self.ce(probs/self.config['train_params']['temperatur'], Y)
            loss+= train_params['loss_fn']['scaling_ce'] * loss0
            self.losses['Cross Entropy'].append(loss.item())

        # Add other losses of not pretraining
        if self.gnn_loss or self.of:
            edge_attr, edge_index, fc7 = self.graph_generator.get_graph(fc7, Y)
            if type(loss) != int:
                loss = loss.cuda(self.device)
            pred, feats = self.gnn(fc7, edge_index, edge_attr, train_params['output_train_gnn'])
        
        #self.comp_list.append(self.comp(fc7, feats[-1]))

        if self.gnn_loss:
            if self.every:
                loss1 = [gnn_loss(pr/self.config['train_params']['temperatur'], Y) for gnn_loss, pr in zip(self.gnn_loss, pred)]
            else:
                loss1 = [self.gnn_loss(pred[-1]/self.config['train_params']['temperatur'], Y)]
            lo = [train_params['loss_fn']['scaling_gnn'] * l for l in loss1]
            loss += sum(lo)
            [self.losses['GNN'+ str(i)].append(l.item()) for i, l in enumerate(loss1)]
        return loss

    def step(self, loss):
        loss.backward()

        self.opt.step()

