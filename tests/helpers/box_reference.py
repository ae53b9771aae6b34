"""Slow references of the localisation metrics (Choe et al. 2020's MaxBoxAccV2, CorLoc, the
DINO-seg box), written from their definitions with Python loops: a flood fill for the connected
components, one IoU at a time."""

from collections import deque


def components(mask, eight):
    """The connected components of ``mask`` (a list of lists of bools), each a list of
    (row, col) pixels, in raster order of their first pixel."""
    rows, cols = len(mask), len(mask[0])
    seen = [[False] * cols for _ in range(rows)]
    steps = [(-1, 0), (1, 0), (0, -1), (0, 1)]
    if eight:
        steps += [(-1, -1), (-1, 1), (1, -1), (1, 1)]
    found = []
    for r in range(rows):
        for c in range(cols):
            if mask[r][c] and not seen[r][c]:
                seen[r][c] = True
                queue, pixels = deque([(r, c)]), []
                while queue:
                    y, x = queue.popleft()
                    pixels.append((y, x))
                    for dy, dx in steps:
                        ny, nx = y + dy, x + dx
                        if 0 <= ny < rows and 0 <= nx < cols and mask[ny][nx] and not seen[ny][nx]:
                            seen[ny][nx] = True
                            queue.append((ny, nx))
                found.append(pixels)
    return found


def iou(a, b, inclusive):
    one = 1 if inclusive else 0
    w = min(a[2], b[2]) - max(a[0], b[0]) + one
    h = min(a[3], b[3]) - max(a[1], b[1]) + one
    inter = max(w, 0) * max(h, 0)
    union = (a[2] - a[0] + one) * (a[3] - a[1] + one) + (b[2] - b[0] + one) * (b[3] - b[1] + one)
    union -= inter
    return inter / union if union > 0 else 0.0


def slow_maxboxacc_v2(scoremaps, truths, thresholds, deltas=(0.3, 0.5, 0.7)):
    """MaxBoxAccV2 and the correct counts ``[delta][tau]`` of normalised score maps (lists of
    lists of floats in [0, 1]) and their ground-truth boxes."""
    correct = [[0] * len(thresholds) for _ in deltas]
    for scoremap, truth in zip(scoremaps, truths):
        height, width = len(scoremap), len(scoremap[0])
        quantised = [[int(v * 255) for v in row] for row in scoremap]
        top = max(max(row) for row in quantised)
        for t, tau in enumerate(thresholds):
            cut = int(tau * top)
            mask = [[v > cut for v in row] for row in quantised]
            boxes = []
            for pixels in components(mask, eight=True):
                ys, xs = [p[0] for p in pixels], [p[1] for p in pixels]
                boxes.append(
                    (min(xs), min(ys), min(max(xs) + 1, width - 1), min(max(ys) + 1, height - 1))
                )
            boxes = boxes or [(0, 0, 0, 0)]
            best = max(iou(b, g, True) for b in boxes for g in truth)
            for d, delta in enumerate(deltas):
                correct[d][t] += best >= delta
    per_delta = [max(row) / len(scoremaps) for row in correct]
    return sum(per_delta) / len(per_delta), correct


def slow_dino_seg_box(attention, patch, mass=0.6):
    """The DINO-seg box of an attention map (a list of lists of floats)."""
    rows, cols = len(attention), len(attention[0])
    flat = [(attention[r][c], r, c) for r in range(rows) for c in range(cols)]
    total = sum(v for v, _, _ in flat)
    keep = [[False] * cols for _ in range(rows)]
    running = 0.0
    for value, r, c in sorted(flat, key=lambda item: item[0]):
        running += value / total
        keep[r][c] = running > 1 - mass
    found = components(keep, eight=False)
    largest = max(found, key=len)  # the first of the largest in raster order
    ys, xs = [p[0] for p in largest], [p[1] for p in largest]
    return (min(xs) * patch, min(ys) * patch, (max(xs) + 1) * patch, (max(ys) + 1) * patch)


def slow_lost_box(features, rows, cols, patch, k=100):
    """LOST's box (Siméoni et al., BMVC 2021, §3) of patch features (a list of lists, row-major
    patches), one dot product at a time."""
    count = len(features)
    dot = [
        [sum(a * b for a, b in zip(features[p], features[q])) for q in range(count)]
        for p in range(count)
    ]
    degree = [sum(1 for q in range(count) if dot[p][q] > 0) for p in range(count)]
    order = sorted(range(count), key=lambda p: (degree[p], p))
    seed = order[0]
    similar = [q for q in order[:k] if dot[seed][q] > 0]
    mask = [
        [sum(dot[s][r * cols + c] for s in similar) > 0 for c in range(cols)] for r in range(rows)
    ]
    (component,) = [
        pixels for pixels in components(mask, eight=False) if (seed // cols, seed % cols) in pixels
    ]
    ys, xs = [p[0] for p in component], [p[1] for p in component]
    return (min(xs) * patch, min(ys) * patch, (max(xs) + 1) * patch, (max(ys) + 1) * patch)
