import torch
import torch.nn as nn
import torch.nn.init as init
from ._shims import resnet50  # [gspdml shim] torchvision >= 0.13 takes no positional `pretrained`

def mixup_data(p, n, lam):    
	mixed_x = lam * p + (1 - lam) * n

	return mixed_x


class Resnet50(nn.Module):
	def __init__(self,embedding_size, pretrained=True, is_norm=True, bn_freeze = True):
		super(Resnet50, self).__init__()

		self.model = resnet50(pretrained)
		self.is_norm = is_norm
		self.embedding_size = embedding_size
		self.num_ftrs = self.model.fc.in_features
		self.model.gap = nn.AdaptiveAvgPool2d(1)
		self.model.gmp = nn.AdaptiveMaxPool2d(1)
		self.model.embedding = nn.Linear(self.num_ftrs, self.embedding_size)
		self._initialize_weights()

		if bn_freeze:
			for m in self.model.modules():
				if isinstance(m, nn.BatchNorm2d):
					m.eval()
					m.weight.requires_grad_(False)
					m.bias.requires_grad_(False)

	def l2_norm(self,input):
		input_size = input.size()
		buffer = torch.pow(input, 2)

		normp = torch.sum(buffer, 1).add_(1e-12)
		norm = torch.sqrt(normp)

		_output = torch.div(input, norm.view(-1, 1).expand_as(input))

		output = _output.view(input_size)

		return output

	def forward(self, x, a2, pos, neg, lam, mode, type):
		x = self.model.conv1(x)
		x = self.model.bn1(x)
		x = self.model.relu(x)
		x = self.model.maxpool(x)
		x = self.model.layer1(x)
		x = self.model.layer2(x)
		x = self.model.layer3(x)		
		x = self.model.layer4(x)

		if(mode == 'pos_neg_mixup'):
			
			if(type == 'clean_anchor'):
				x = x[a2.long()]
				
			if(type == 'mixed'):
				x = mixup_data(x[pos.long()], x[neg.long()], lam)


		if(mode == 'anc_neg_mixup'):
			
			if(type == 'clean_anchor'):
				x = x[a2.long()]
				
			if(type == 'mixed'):
				x = mixup_data(x[a2.long()], x[neg.long()], lam)
				
		avg_x = self.model.gap(x)
		max_x = self.model.gmp(x)

		x = max_x + avg_x
		x = x.view(x.size(0), -1)
		
		x = self.model.embedding(x)

		if self.is_norm:
			x = self.l2_norm(x)

		return x
			
		
	def _initialize_weights(self):
		init.kaiming_normal_(self.model.embedding.weight, mode='fan_out')
		init.constant_(self.model.embedding.bias, 0)