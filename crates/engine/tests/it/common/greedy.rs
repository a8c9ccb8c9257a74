//! Greedy continuation on a model's KV cache, shared by the tests that match reference greedy
//! tokens (`arch_goldens.rs`, `gemma3_270m.rs`).

use edgefit_engine::{KvCache, Logits, Model};

/// The index of the largest value (the first one on ties).
pub fn argmax(v: &[f32]) -> u32 {
    v.iter()
        .enumerate()
        .fold(
            (0, f32::NEG_INFINITY),
            |b, (i, &x)| if x > b.1 { (i, x) } else { b },
        )
        .0 as u32
}

/// `n` argmax tokens: the first from `last_logits` (the prompt's last position), each next one
/// from a decode step on `cache`.
pub fn greedy(model: &Model, cache: &mut KvCache, last_logits: &[f32], n: usize) -> Vec<u32> {
    let mut next = argmax(last_logits);
    let mut out = vec![next];
    while out.len() < n {
        let l = model.forward(&[next], cache, Logits::Last).unwrap();
        next = argmax(&l);
        out.push(next);
    }
    out
}
