//! The thermal governor's parameters of a device class ([`GovernorParams`]) and the two phone
//! figures they default to. Plain data: a device profile may carry them (`thermal.governor`),
//! [`crate::thermal`] simulates with them (and reads a profile's override,
//! `GovernorParams::of`).

use serde::{Deserialize, Serialize};

use crate::error::{EstimateError, Result};

/// The body temperature a phone's governor holds, °C (the body node's mean; the skin over the
/// SoC runs hotter than the mean). **Fitted**: the value that best matches the kept fractions
/// of the committed iPhone traces (grid 30-40 °C by 0.5 °C jointly with
/// [`PHONE_DIE_TO_BODY_K_PER_W`](crate::thermal::PHONE_DIE_TO_BODY_K_PER_W), least squares over
/// every timed sample, at the trace's room temperature when stated, else the profiles' 25 °C);
/// `tests/thermal_traces.rs` refits it without each trace in turn and checks the held-out trace.
pub const PHONE_SKIN_LIMIT_C: f64 = 33.5;

/// Share of a phone unit's active power that does not scale with its clock (leakage at a hot
/// junction and the unit's share of the always-on fabric). **Estimate** (leakage is commonly a
/// quarter to a third of mobile SoC power at high temperature); not fitted.
pub const PHONE_STATIC_SHARE: f64 = 0.3;

/// The governor's parameters for a device class (or a profile's `thermal.governor` override).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct GovernorParams {
    /// Body temperature the governor holds, °C; `null`: no skin limit, only the die trip (a
    /// board or a fan-cooled laptop that nobody holds).
    pub skin_limit_c: Option<f64>,
    /// Share `σ` of the unit's active power that does not scale with its clock, in [0, 1].
    pub static_share: f64,
    /// How far memory bandwidth follows the unit's DVFS level under the governor, in [0, 1]
    /// (1: the memory clock is voted down with the unit, as Adreno's per-power-level DDR votes;
    /// `null`: the unit profile's own `bandwidth_freq_sensitivity`).
    pub memory_follows: Option<f64>,
}

impl GovernorParams {
    /// The class defaults for a device `kind`: phones and tablets hold a skin limit
    /// ([`PHONE_SKIN_LIMIT_C`]), lower their memory clock with the unit and have a static share
    /// ([`PHONE_STATIC_SHARE`]); boards, laptops and browsers keep only the die trip, their
    /// units' own bandwidth sensitivity and dynamic power (no sustained-load trace checks those
    /// classes).
    pub fn for_kind(kind: &str) -> GovernorParams {
        match kind {
            "phone" | "tablet" => GovernorParams {
                skin_limit_c: Some(PHONE_SKIN_LIMIT_C),
                static_share: PHONE_STATIC_SHARE,
                memory_follows: Some(1.0),
            },
            _ => GovernorParams {
                skin_limit_c: None,
                static_share: 0.0,
                memory_follows: None,
            },
        }
    }

    /// Checks the ranges, naming the field.
    pub fn validate(&self, device: &str) -> Result<()> {
        let bad = |field: &str, reason: String| EstimateError::InvalidDevice {
            device: device.to_string(),
            field: format!("thermal.governor.{field}"),
            reason,
        };
        if let Some(t) = self.skin_limit_c {
            if !(t.is_finite() && (-40.0..=150.0).contains(&t)) {
                return Err(bad("skin_limit_c", format!("{t} must be in [-40, 150]")));
            }
        }
        if !(0.0..=1.0).contains(&self.static_share) {
            return Err(bad(
                "static_share",
                format!("{} must be in [0, 1]", self.static_share),
            ));
        }
        if let Some(m) = self.memory_follows {
            if !(0.0..=1.0).contains(&m) {
                return Err(bad("memory_follows", format!("{m} must be in [0, 1]")));
            }
        }
        Ok(())
    }
}
