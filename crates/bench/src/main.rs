//! `edgefit-bench`: the kernel benchmark natively (see the library docs). Prints one table.
//!
//! Options: `--quick` (decode only, shorter budgets), `--gemma` (Gemma 3 270M's products
//! only, see `edgefit_bench::gemma`), `--m 1,64` (activation rows),
//! `--shapes head,large` (name or `NxK` substrings), `--budget-ms MS`, `--json PATH` (also write
//! the raw rows).

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    if let Err(e) = native::run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use edgefit_bench::{progress_line, render, run_all, Config};
    use std::time::Instant;

    fn list<T: std::str::FromStr>(flag: &str, v: &str) -> Result<Vec<T>, String> {
        v.split(',')
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.trim()
                    .parse()
                    .map_err(|_| format!("`{flag} {v}`: `{s}` is not valid"))
            })
            .collect()
    }

    pub fn run() -> Result<(), String> {
        // candle's CPU matmul uses rayon's thread count: one thread, like every other row.
        std::env::set_var("RAYON_NUM_THREADS", "1");
        let mut cfg = Config::default();
        let mut json = None;
        let mut gemma = false;
        let mut args = std::env::args().skip(1);
        while let Some(a) = args.next() {
            let mut value = || args.next().ok_or(format!("`{a}` needs a value"));
            match a.as_str() {
                "--quick" => cfg = Config::quick(),
                "--gemma" => gemma = true,
                "--m" => cfg.ms = list("--m", &value()?)?,
                "--shapes" => cfg.shapes = list("--shapes", &value()?)?,
                "--budget-ms" => {
                    let v = value()?;
                    cfg.budget_ms = v
                        .parse()
                        .map_err(|_| format!("`--budget-ms {v}` is not a number"))?;
                }
                "--json" => json = Some(value()?),
                "-h" | "--help" => {
                    println!(
                        "usage: edgefit-bench [--quick] [--gemma] [--m 1,64] [--shapes NAME|NxK,...] \
                         [--budget-ms MS] [--json PATH]"
                    );
                    return Ok(());
                }
                other => return Err(format!("unknown option `{other}` (try --help)")),
            }
        }
        if cfg.ms.is_empty() || cfg.ms.contains(&0) {
            return Err("--m needs positive row counts".into());
        }
        if !gemma && cfg.selected_shapes().is_empty() {
            return Err(format!("--shapes {:?} selects no shape", cfg.shapes));
        }
        let start = Instant::now();
        let clock = move || start.elapsed().as_secs_f64() * 1e3;
        let runtime = format!("native {}", std::env::consts::ARCH);
        if gemma {
            print!(
                "{}",
                edgefit_bench::gemma::run_gemma(&runtime, &cfg, &clock)?
            );
            return Ok(());
        }
        eprintln!("edgefit-bench: {runtime}, measuring…");
        let report = run_all(&runtime, &cfg, &clock, &mut |r| {
            eprintln!("{}", progress_line(r))
        })?;
        if let Some(path) = json {
            let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
            std::fs::write(&path, text).map_err(|e| format!("writing {path}: {e}"))?;
        }
        print!("{}", render(&report));
        Ok(())
    }
}
