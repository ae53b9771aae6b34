# The two input-mixup pair builders of the Metrix release (mixup/utils.py, b679703, lines 36-105),
# with ONE change that is not the release's: `neg[indices]` -> `neg[idxs][indices]` (marked
# below). In the release, `indices` orders the negatives of the current anchor (`neg[idxs]`) by
# distance but indexes the whole list `neg`, so every anchor's "hardest negative" is taken from
# the first anchor's negatives at that position (sometimes the anchor itself, or one of its
# positives). tests/parity/test_metrix_step.py runs gspdml's input mixup (each anchor's own
# hardest negative, Psomas thesis §2.4.2) against these, and asserts that the release as it is
# differs; docs/paper-vs-code.md has the row.
import itertools

import numpy as np
import torch

from .mixup.utils import mixup_data

def input_posneg_pair_mixup_for_pos_anchor(a1, pos, a2, neg, clean_embedding, images, target, sim_mat, network, top_k):
	clean_sim = sim_mat(clean_embedding)
	anch_neg, hard_neg = [],[]
	for anchor_pos in a1:
		idxs = torch.where(anchor_pos == a2)[0]
		dist = clean_sim[a2[idxs], neg[idxs]]
		_,indices = torch.sort(dist,descending=False)

		hard_neg.append(neg[idxs][indices][:top_k].cpu().numpy())  # [gspdml: neg[idxs][indices]]
		anch_neg.append(a2[idxs][:top_k].cpu().numpy())

	a2 = list(itertools.chain.from_iterable(anch_neg))
	neg = list(itertools.chain.from_iterable(hard_neg))
	pos = [ele for ele in pos.cpu().numpy() for i in range(top_k)]

	anchor_images = images[a2]
	pos_images = images[pos]
	neg_images = images[neg]

	target_pos = target[pos]
	target_neg = target[neg]

	mixed_images, lam = mixup_data(pos_images, neg_images, alpha=2.0)

	embedding_anchor_clean = network(anchor_images)
	embedding_mixed = network(mixed_images)

	similarity_mixed = sim_mat(embedding_anchor_clean, embedding_mixed)

	return similarity_mixed, target_pos, target_neg, torch.from_numpy(np.array(a2)), torch.from_numpy(np.array(pos)), torch.from_numpy(np.array(neg)), lam


def input_neg_pair_mixup_without_posanchor(a1, a2, neg, clean_embedding, images, target, sim_mat, network, top_k):
	clean_sim = sim_mat(clean_embedding)
	for anchor_pos in np.unique(a1.cpu().numpy()):
		idxs = torch.where(anchor_pos == a2)[0]
		a2 = torch.cat([a2[0:idxs[0]], a2[idxs[-1]+1:]])
		neg = torch.cat([neg[0:idxs[0]], neg[idxs[-1]+1:]])
	
	try:
		del anchor_pos
	except UnboundLocalError:
		pass
	
	anch_neg, hard_neg = [],[]
	for anchor in np.unique(a2.cpu().numpy()):
		idxs = torch.where(anchor == a2)[0]
		dist = clean_sim[a2[idxs], neg[idxs]]
		_,indices = torch.sort(dist,descending=False)

		hard_neg.append(neg[idxs][indices][:top_k].cpu().numpy())  # [gspdml: neg[idxs][indices]]
		anch_neg.append(a2[idxs][:top_k].cpu().numpy())
	
	a2_new = list(itertools.chain.from_iterable(anch_neg))
	neg_new = list(itertools.chain.from_iterable(hard_neg))

	anchor_images = images[a2_new]
	neg_images = images[neg_new]

	target_pos = target[a2_new]
	target_neg = target[neg_new]

	mixed_images, lam = mixup_data(anchor_images, neg_images, alpha=2.0)

	embedding_anchor_clean = network(anchor_images)
	embedding_mixed = network(mixed_images)

	similarity_mixed = sim_mat(embedding_anchor_clean, embedding_mixed)

	return similarity_mixed, target_pos, target_neg, torch.from_numpy(np.array(a2_new)), torch.from_numpy(np.array(neg_new)), lam
