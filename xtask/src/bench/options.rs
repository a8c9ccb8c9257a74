//! The options after `cargo xtask bench [which]`, parsed once for every bench. A leaf of
//! [`crate::bench`].

use anyhow::{bail, Context, Result};
use std::path::PathBuf;

/// Options after `bench [which]`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Options {
    /// Kernels: decode only, shorter budgets; kv: fewer tokens.
    pub(crate) quick: bool,
    /// E2e, kv: runs per row (the table shows medians).
    pub(crate) runs: usize,
    /// E2e: the thread counts the CLI and native llama.cpp run at (`--threads 1,2`).
    pub(crate) threads: Vec<usize>,
    /// E2e: the GGUF file (`--model PATH`; default [`crate::setup::MODEL_PATH`]).
    pub(crate) model: Option<PathBuf>,
}

/// The kv bench runs each format once unless `--runs N` says otherwise.
pub(crate) fn kv_options(opts: &Options, rest: &[String]) -> Options {
    let runs = if rest.iter().any(|a| a == "--runs") {
        opts.runs
    } else {
        1
    };
    Options {
        runs,
        ..opts.clone()
    }
}

pub(crate) fn parse_options(rest: &[String]) -> Result<Options> {
    let mut opts = Options {
        quick: false,
        runs: 3,
        threads: vec![1],
        model: None,
    };
    let mut it = rest.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--quick" => opts.quick = true,
            "--runs" => {
                let v = it.next().context("`--runs` needs a number")?;
                opts.runs = v
                    .parse()
                    .ok()
                    .filter(|&n| n >= 1)
                    .with_context(|| format!("`--runs {v}`: expected a number, 1 or more"))?;
            }
            "--threads" => {
                let v = it.next().context("`--threads` needs a list such as 1,2")?;
                opts.threads = parse_thread_list(v)?;
            }
            "--model" => {
                let v = it.next().context("`--model` needs a GGUF file")?;
                opts.model = Some(PathBuf::from(v));
            }
            other => bail!(
                "unknown option `{other}` for bench: expected --quick, --runs N, --threads LIST \
                 or --model PATH"
            ),
        }
    }
    Ok(opts)
}

/// `1,2`: distinct thread counts from 1 to 256, in the order given.
pub(crate) fn parse_thread_list(v: &str) -> Result<Vec<usize>> {
    let mut out = Vec::new();
    for part in v.split(',') {
        let n = part
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=256).contains(n))
            .with_context(|| {
                format!("`--threads {v}`: `{part}` is not a thread count from 1 to 256")
            })?;
        if out.contains(&n) {
            bail!("`--threads {v}`: {n} is listed twice");
        }
        out.push(n);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::util::strings as s;
    use std::path::Path;

    #[test]
    fn options_parse() {
        assert_eq!(
            parse_options(&[]).unwrap(),
            Options {
                quick: false,
                runs: 3,
                threads: vec![1],
                model: None,
            }
        );
        let o = parse_options(&s(&["--quick", "--runs", "5"])).unwrap();
        assert!(o.quick && o.runs == 5);
        assert!(parse_options(&s(&["--runs", "0"])).is_err());
        assert!(parse_options(&s(&["--fast"])).is_err());
        assert_eq!(kv_options(&o, &s(&["--quick"])).runs, 1);
        assert_eq!(kv_options(&o, &s(&["--runs", "5"])).runs, 5);
        let o = parse_options(&s(&["--threads", "1,2", "--model", "m.gguf"])).unwrap();
        assert_eq!(o.threads, [1, 2]);
        assert_eq!(o.model.as_deref(), Some(Path::new("m.gguf")));
        for bad in ["0", "1,,2", "x", "257", "2,2", ""] {
            let e = parse_options(&s(&["--threads", bad]))
                .unwrap_err()
                .to_string();
            assert!(e.contains("--threads"), "{bad}: {e}");
        }
        assert!(parse_options(&s(&["--threads"])).is_err());
    }
}
