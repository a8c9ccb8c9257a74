//! Helpers shared by the modules of this binary (`hostile_cases` is also read by the CLI's
//! hostile-file test, through a `#[path]`).

pub mod greedy;
pub mod hostile_cases;
pub mod synthetic;
