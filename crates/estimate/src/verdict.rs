//! Verdicts: the golden four and the reading-speed experience line.
//!
//! - memory: `total ≤ min(threshold, device usable)` and, in a browser, the wasm part within
//!   the wasm limit;
//! - ttft: `ttft_ms < threshold` (default 800 ms);
//! - sustained: `sustained_tok_s ≥ threshold` (default 25) — the thermal model's figure, after
//!   throttling;
//! - temperature: `temp_rise_c < threshold` (default 12 °C).
//!
//! Experience (on sustained tokens/s): below `reading_low` = slower than reading; up to
//! `reading_high` = at reading speed; below `instant` = faster than reading; else instant.

use serde::{Deserialize, Serialize};

use crate::deploy::Thresholds;

/// Pass or fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Meets the threshold.
    Pass,
    /// Does not.
    Fail,
}

impl Verdict {
    pub(crate) fn from_bool(ok: bool) -> Self {
        if ok {
            Verdict::Pass
        } else {
            Verdict::Fail
        }
    }
}

/// Where the generation speed sits against human reading.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Experience {
    /// Slower than people read (< ~4 tok/s).
    SlowerThanReading,
    /// About reading speed (~4–8 tok/s).
    ReadingSpeed,
    /// Faster than reading, not yet instant.
    FasterThanReading,
    /// ~50 tok/s and up: feels instant.
    Instant,
}

/// The verdicts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdicts {
    /// Peak memory.
    pub memory: Verdict,
    /// Time to first token.
    pub ttft: Verdict,
    /// Sustained decode speed.
    pub sustained: Verdict,
    /// Temperature rise.
    pub temperature: Verdict,
    /// Experience line.
    pub experience: Experience,
    /// The thresholds applied.
    pub thresholds: Thresholds,
}

/// Classifies a tokens/s figure on the experience line.
pub fn experience(tok_s: f64, t: &Thresholds) -> Experience {
    if tok_s < t.reading_low_tok_s {
        Experience::SlowerThanReading
    } else if tok_s <= t.reading_high_tok_s {
        Experience::ReadingSpeed
    } else if tok_s < t.instant_tok_s {
        Experience::FasterThanReading
    } else {
        Experience::Instant
    }
}
