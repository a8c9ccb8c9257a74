//! README's committed validation figures must be what `edgefit validate` prints: the block
//! between `<!-- validate:begin -->` and `<!-- validate:end -->` (inside a ```text fence) is
//! compared with [`ValidationReport::summary`], so `cargo xtask test`'s native test step fails
//! when the model, the data or the README drift apart.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

const README: &str = include_str!("../../../README.md");

fn committed_block() -> Option<String> {
    let start = README.find("<!-- validate:begin -->")? + "<!-- validate:begin -->".len();
    let end = README[start..].find("<!-- validate:end -->")? + start;
    let body: Vec<&str> = README[start..end]
        .lines()
        .filter(|l| !l.trim_start().starts_with("```"))
        .collect();
    Some(body.join("\n").trim().to_string())
}

#[test]
fn readme_validation_block_matches_what_the_command_prints() {
    let printed = edgefit_estimate::validate::validate()
        .unwrap()
        .summary()
        .trim()
        .to_string();
    let committed = committed_block().expect("README.md has no <!-- validate:begin/end --> block");
    if committed != printed {
        panic!(
            "README.md's validation block differs from `edgefit validate`; paste the summary \
             it prints now:\n{printed}\n--- committed:\n{committed}"
        );
    }
}
