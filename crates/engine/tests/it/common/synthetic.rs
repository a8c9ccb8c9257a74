//! The synthetic model as an [`Engine`]: the load the tests of this binary repeat.

use edgefit_engine::native::NativePlatform;
use edgefit_engine::synthetic::{gguf_bytes, SyntheticDType};
use edgefit_engine::{Engine, LoadOptions};

/// An engine on the synthetic GGUF model of `seed` in `dtype`, loaded with `options`.
pub fn synthetic_engine(seed: u64, dtype: SyntheticDType, options: LoadOptions) -> Engine {
    let bytes = gguf_bytes(seed, dtype).expect("synthetic model");
    Engine::load_gguf(
        &mut std::io::Cursor::new(bytes),
        Box::new(NativePlatform::default()),
        options,
        &mut |_, _| {},
    )
    .expect("the synthetic model loads")
}
