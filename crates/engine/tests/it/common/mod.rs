//! Helpers shared by the modules of this binary (`hostile_cases` is also read by the CLI's
//! hostile-file test, through a `#[path]`).

/// Native only: rebuilds the fixtures' model files.
#[cfg(not(target_arch = "wasm32"))]
pub mod fixture_files;
/// Native only: reads the fixture files.
#[cfg(not(target_arch = "wasm32"))]
pub mod fixtures;
pub mod greedy;
pub mod hostile_cases;
/// Native only, like every module that loads through it (it needs the native platform).
#[cfg(not(target_arch = "wasm32"))]
pub mod synthetic;
