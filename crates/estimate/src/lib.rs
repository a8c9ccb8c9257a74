//! # edgefit-estimate
//!
//! Owns the pure budget estimator and the device thermal model: given a model's shape
//! (`ModelSpec`), a deployment (weight format, KV format, context, prompt and generated tokens)
//! and a device profile, it predicts memory, time-to-first-token, sustained decode speed and
//! temperature rise, and explains every number. It has no clock and does no I/O, so the page,
//! the CLI and the engine's reports all get the same answer for the same inputs.
//!
//! Nothing is implemented yet: issue 3 delivers the estimator.
