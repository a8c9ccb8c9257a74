//! The import-cycle checker shared by the crates' layering tests (no dependency: a test includes
//! this file with `#[path = "support/layering.rs"] mod layering;`). It reads a crate's `src/` at
//! test time (milliseconds): the `crate::…` paths of every module (code only, comments skipped; a
//! directory module counts as one; a name lib.rs re-exports counts as a path into its module)
//! form a graph, and [`cycles`] gives its strongly connected components of more than one module.
//! The engine's `tests/it/layering.rs` includes this file too (by path, from the other crate).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of `src` without comments (line comments, doc comments, and the tail of a line
/// after ` //`).
pub fn code(src: &str) -> String {
    src.lines()
        .map(|l| {
            let t = l.trim_start();
            if t.starts_with("//") {
                ""
            } else if let Some(i) = l.find(" //") {
                &l[..i]
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The first segments of the paths after each `crate::` of `code`: `crate::a::B` gives `a`,
/// `crate::{a::B, c}` gives `a` and `c`.
pub fn crate_paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut start_of_path = true;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => start_of_path = true,
                    c if c.is_whitespace() => {}
                    _ if depth == 1 && start_of_path => {
                        out.push(ident_at(&group[j..]).to_string());
                        start_of_path = false;
                    }
                    _ => {}
                }
            }
        } else {
            out.push(ident_at(rest).to_string());
        }
    }
    out
}

/// The module a file of `src` belongs to (`a.rs` and `a/…` are module `a`); `None` for lib.rs.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).expect("file under src");
    let first = rel.components().next()?.as_os_str().to_str()?.to_string();
    let name = first.strip_suffix(".rs").unwrap_or(&first).to_string();
    (name != "lib").then_some(name)
}

/// Names lib.rs re-exports (`pub use a::{B, C}` makes `crate::B` a path into `a`).
fn root_reexports(lib: &str, modules: &BTreeSet<String>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let lib = code(lib);
    for (i, _) in lib.match_indices("pub use ") {
        let rest = &lib[i + "pub use ".len()..];
        let module = ident_at(rest);
        if !modules.contains(module) {
            continue;
        }
        let stmt = &rest[..rest.find(';').expect("use ends with ;")];
        let items = stmt[module.len()..].trim_start_matches("::");
        for name in items
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|n| !n.is_empty())
        {
            out.insert(name.to_string(), module.to_string());
        }
    }
    out
}

/// Module → the other modules it names, for the crate whose sources are in `src`.
pub fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeSet<String> = files.iter().filter_map(|f| module_of(src, f)).collect();
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
    let reexports = root_reexports(&lib, &modules);
    let mut edges: BTreeMap<String, BTreeSet<String>> = modules
        .iter()
        .map(|m| (m.clone(), BTreeSet::new()))
        .collect();
    for f in &files {
        let Some(m) = module_of(src, f) else {
            continue;
        };
        let text = std::fs::read_to_string(f).expect("source");
        for first in crate_paths(&code(&text)) {
            let target = if modules.contains(&first) {
                Some(first)
            } else {
                reexports.get(&first).cloned()
            };
            if let Some(t) = target.filter(|t| *t != m) {
                edges.get_mut(&m).expect("module").insert(t);
            }
        }
    }
    edges
}

/// Strongly connected components of more than one node (Tarjan).
pub fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    struct T<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        out: Vec<BTreeSet<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let i = t.index.len();
        t.index.insert(v, i);
        t.low.insert(v, i);
        t.stack.push(v);
        for w in &t.edges[v] {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if t.stack.contains(&w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = BTreeSet::new();
            loop {
                let w = t.stack.pop().expect("on stack");
                comp.insert(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}
