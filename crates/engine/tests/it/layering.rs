//! No module of the engine imports itself through a cycle: the `crate::…` paths of every module
//! of `src/` (code only, comments skipped; a directory module counts as one) form a graph that
//! must have no strongly connected component of more than one module, except the ones listed
//! in [`KNOWN`] with the reason they stay. The checker is the estimator's
//! `tests/support/layering.rs` (included by path: no dependency), whose own test checks it on
//! a made-up graph. Reads the sources at test time (milliseconds).

use std::collections::BTreeSet;
use std::path::Path;

#[path = "../../../estimate/tests/support/layering.rs"]
mod checker;

use checker::{cycles, graph};

/// Cycles left on purpose, each with why. None today: the last one, `config` ↔ `weights`
/// (the architecture table names tensor parts), ended when the tensor table moved to the leaf
/// `tensors`.
const KNOWN: &[(&[&str], &str)] = &[];

#[test]
fn no_module_imports_itself_through_a_cycle() {
    let edges = graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    for leaf in ["error", "ops", "platform", "tensors"] {
        assert!(
            edges[leaf].is_empty(),
            "{leaf} is a leaf, but names {:?}",
            edges[leaf]
        );
    }
    assert!(edges["engine"].contains("prune"), "the graph reads imports");
    let known: Vec<BTreeSet<String>> = KNOWN
        .iter()
        .map(|(c, _)| c.iter().map(|m| m.to_string()).collect())
        .collect();
    let new: Vec<_> = cycles(&edges)
        .into_iter()
        .filter(|c| !known.contains(c))
        .collect();
    assert!(new.is_empty(), "import cycles between modules: {new:?}");
}
