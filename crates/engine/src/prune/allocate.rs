//! How many units of a structure each layer loses: the estimator's rounding, MLP width
//! alignment, and uniform or global (FLAP-style) allocation (module docs of [`super`]).

use super::Allocation;

/// Units a layer keeps of `n` after removing the fraction `r`: `max(1, round((1 − r) · n))`.
pub(super) fn keep_count(r: f64, n: usize) -> usize {
    (((1.0 - r) * n as f64).round() as usize).clamp(1, n.max(1))
}

/// `kept` rounded to the nearest multiple of `m` within `[m, full]`; unchanged when nothing is
/// pruned, `m` is 1, or the width is not above one multiple.
pub(super) fn align(kept: usize, full: usize, m: usize) -> usize {
    if m <= 1 || kept >= full || full <= m {
        return kept;
    }
    (((kept as f64 / m as f64).round() as usize) * m).clamp(m, full)
}

/// Units each layer removes (`ratios[l]`: the fraction layer `l` asks to remove): its own
/// ratio's count, or (global) the same total ranked across layers by score over the layer's
/// mean score, each layer keeping at least one unit.
pub(super) fn removal_counts(
    scores: &[Vec<f64>],
    ratios: &[f64],
    allocation: Allocation,
) -> Vec<usize> {
    let uniform: Vec<usize> = scores
        .iter()
        .zip(ratios)
        .map(|(s, &r)| s.len() - keep_count(r, s.len()))
        .collect();
    if allocation == Allocation::Uniform {
        return uniform;
    }
    let budget: usize = uniform.iter().sum();
    let mut all: Vec<(f64, usize)> = Vec::new();
    for (li, s) in scores.iter().enumerate() {
        let mean = s.iter().sum::<f64>() / s.len().max(1) as f64;
        let mut sorted = s.clone();
        sorted.sort_by(f64::total_cmp);
        for &v in sorted.iter().take(s.len().saturating_sub(1)) {
            all.push((if mean > 0.0 { v / mean } else { 0.0 }, li));
        }
    }
    all.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut counts = vec![0; scores.len()];
    for &(_, li) in all.iter().take(budget) {
        counts[li] += 1;
    }
    counts
}

/// `units` (parallel to `scores`) without its `remove` lowest-scoring ones (ties: lower index
/// goes first), in their original order.
pub(super) fn keep_indices(units: &[usize], scores: &[f64], remove: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..units.len()).collect();
    order.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]).then(a.cmp(&b)));
    let mut gone = vec![false; units.len()];
    for &i in order.iter().take(remove) {
        gone[i] = true;
    }
    units
        .iter()
        .zip(gone)
        .filter(|(_, g)| !g)
        .map(|(&u, _)| u)
        .collect()
}
