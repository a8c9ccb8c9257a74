//! No module of the estimator imports itself through a cycle: the `crate::…` paths of every
//! module of `src/` form a graph with no strongly connected component of more than one module
//! (the checker is `support/layering.rs`). The plain data (error, spec, format, deploy, source,
//! governor, band) sits at the bottom, the computations above it, report, validate, fit and
//! compare on top.
//! Reads the sources at test time (milliseconds).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

#[path = "support/layering.rs"]
mod layering;

use layering::{code, crate_paths, cycles, graph};

#[test]
fn the_checker_finds_paths_and_cycles() {
    let src = "use crate::a::X;\nuse crate::{\n    b::{C, D},\n    c,\n};\n// crate::z\nlet y = 1; // crate::w\n";
    assert_eq!(crate_paths(&code(src)), ["a", "b", "c"]);
    let g: BTreeMap<String, BTreeSet<String>> = [("a", "b"), ("b", "c"), ("c", "a"), ("d", "a")]
        .iter()
        .map(|(k, v)| (k.to_string(), BTreeSet::from([v.to_string()])))
        .collect();
    let found = cycles(&g);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0], BTreeSet::from(["a", "b", "c"].map(String::from)));
}

#[test]
fn no_module_imports_itself_through_a_cycle() {
    let edges = graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    for leaf in ["error", "source"] {
        assert!(
            edges[leaf].is_empty(),
            "{leaf} is a leaf, but names {:?}",
            edges[leaf]
        );
    }
    assert!(
        edges["report"].contains("latency"),
        "the graph reads imports"
    );
    assert!(
        edges["device"].contains("deploy"),
        "the graph reads imports"
    );
    let found = cycles(&edges);
    assert!(found.is_empty(), "import cycles between modules: {found:?}");
}
