//! The table of a transformer block's tensors, named independently of any file format:
//! [`LayerPart`] (one weight inside a block) and [`TensorRole`] (one weight of the model),
//! with their GGUF and LLaMA-HF names. A leaf: it imports no other module of the crate, so
//! the architecture table ([`crate::config::Arch`], which names parts) and the weights
//! ([`crate::weights`], which hold them) both read it without importing each other. The part
//! methods that read a model's description (its architecture's renames, which optional tensors
//! it has, a part's shape) are in [`crate::config`], beside the types they read.

/// A weight tensor of the model, named independently of any file format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TensorRole {
    Embed,
    /// `layer`, part.
    Layer(usize, LayerPart),
    FinalNorm,
    Output,
}

impl TensorRole {
    /// The GGUF tensor name (`token_embd.weight`, `blk.3.attn_q.weight`, ...).
    pub fn gguf_name(self) -> String {
        match self {
            TensorRole::Embed => "token_embd.weight".to_string(),
            TensorRole::FinalNorm => "output_norm.weight".to_string(),
            TensorRole::Output => "output.weight".to_string(),
            TensorRole::Layer(i, part) => part.gguf_name(i),
        }
    }
}

/// A weight inside one transformer block. With [`LayerPart::ALL`], [`LayerPart::gguf_name`],
/// [`LayerPart::hf_name`], [`LayerPart::shape`] and [`LayerPart::present`] this is the one
/// table of a block's tensors (llama.cpp's `LLM_TENSOR_NAMES` plays this role there) that the
/// loaders, the writers, the memory preflight and the synthetic model iterate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerPart {
    AttnNorm,
    Q,
    K,
    V,
    /// Optional: bias of q ([`crate::config::LlamaConfig::qkv_bias`]).
    QBias,
    KBias,
    VBias,
    /// Optional: RMSNorm weight of each q head ([`crate::config::LlamaConfig::qk_norm`]).
    QNorm,
    KNorm,
    O,
    /// Optional: bias of the output projection ([`crate::config::LlamaConfig::o_bias`]).
    OBias,
    /// Optional: RMSNorm of the attention output ([`crate::config::LlamaConfig::post_norms`]).
    PostAttnNorm,
    FfnNorm,
    Gate,
    Up,
    Down,
    /// Optional: biases of gate, up and down ([`crate::config::LlamaConfig::mlp_bias`]).
    GateBias,
    UpBias,
    DownBias,
    /// Optional: RMSNorm of the MLP output ([`crate::config::LlamaConfig::post_norms`]).
    PostFfnNorm,
}

impl LayerPart {
    /// Every part, in the order the loaders read and the writers write them.
    pub const ALL: [LayerPart; 20] = [
        LayerPart::AttnNorm,
        LayerPart::Q,
        LayerPart::K,
        LayerPart::V,
        LayerPart::QBias,
        LayerPart::KBias,
        LayerPart::VBias,
        LayerPart::QNorm,
        LayerPart::KNorm,
        LayerPart::O,
        LayerPart::OBias,
        LayerPart::PostAttnNorm,
        LayerPart::FfnNorm,
        LayerPart::Gate,
        LayerPart::Up,
        LayerPart::Down,
        LayerPart::GateBias,
        LayerPart::UpBias,
        LayerPart::DownBias,
        LayerPart::PostFfnNorm,
    ];

    /// `(GGUF name, HF name)` inside block `i`, without the `blk.{i}.` / `model.layers.{i}.`
    /// prefix.
    pub(crate) fn names(self) -> (&'static str, &'static str) {
        match self {
            LayerPart::AttnNorm => ("attn_norm.weight", "input_layernorm.weight"),
            LayerPart::Q => ("attn_q.weight", "self_attn.q_proj.weight"),
            LayerPart::K => ("attn_k.weight", "self_attn.k_proj.weight"),
            LayerPart::V => ("attn_v.weight", "self_attn.v_proj.weight"),
            LayerPart::QBias => ("attn_q.bias", "self_attn.q_proj.bias"),
            LayerPart::KBias => ("attn_k.bias", "self_attn.k_proj.bias"),
            LayerPart::VBias => ("attn_v.bias", "self_attn.v_proj.bias"),
            LayerPart::QNorm => ("attn_q_norm.weight", "self_attn.q_norm.weight"),
            LayerPart::KNorm => ("attn_k_norm.weight", "self_attn.k_norm.weight"),
            LayerPart::O => ("attn_output.weight", "self_attn.o_proj.weight"),
            LayerPart::OBias => ("attn_output.bias", "self_attn.o_proj.bias"),
            LayerPart::FfnNorm => ("ffn_norm.weight", "post_attention_layernorm.weight"),
            LayerPart::Gate => ("ffn_gate.weight", "mlp.gate_proj.weight"),
            LayerPart::Up => ("ffn_up.weight", "mlp.up_proj.weight"),
            LayerPart::Down => ("ffn_down.weight", "mlp.down_proj.weight"),
            LayerPart::GateBias => ("ffn_gate.bias", "mlp.gate_proj.bias"),
            LayerPart::UpBias => ("ffn_up.bias", "mlp.up_proj.bias"),
            LayerPart::DownBias => ("ffn_down.bias", "mlp.down_proj.bias"),
            // HF names are the architecture's ([`crate::config::Arch::hf_names`]).
            LayerPart::PostAttnNorm => ("post_attention_norm.weight", ""),
            LayerPart::PostFfnNorm => ("post_ffw_norm.weight", ""),
        }
    }

    /// The GGUF tensor name in block `layer` (`blk.3.attn_q.bias`).
    pub fn gguf_name(self, layer: usize) -> String {
        format!("blk.{layer}.{}", self.names().0)
    }

    /// A vector (norm weight or bias), held as f32.
    pub fn is_vector(self) -> bool {
        matches!(
            self,
            LayerPart::AttnNorm
                | LayerPart::FfnNorm
                | LayerPart::PostAttnNorm
                | LayerPart::PostFfnNorm
                | LayerPart::QBias
                | LayerPart::KBias
                | LayerPart::VBias
                | LayerPart::QNorm
                | LayerPart::KNorm
                | LayerPart::OBias
                | LayerPart::GateBias
                | LayerPart::UpBias
                | LayerPart::DownBias
        )
    }

    /// A norm weight (Gemma's HF files store these as `w` of `1 + w`).
    pub fn is_norm(self) -> bool {
        self.is_vector() && !self.is_bias()
    }

    /// A bias vector (added after its matrix's product).
    pub fn is_bias(self) -> bool {
        matches!(
            self,
            LayerPart::QBias
                | LayerPart::KBias
                | LayerPart::VBias
                | LayerPart::OBias
                | LayerPart::GateBias
                | LayerPart::UpBias
                | LayerPart::DownBias
        )
    }

    /// Whether its rows (or entries) run along q/k head dimensions, so they follow RoPE's
    /// layout: HF's rotate-half order is permuted into pairs at load (and back on export).
    pub fn along_qk(self) -> bool {
        matches!(
            self,
            LayerPart::Q
                | LayerPart::K
                | LayerPart::QBias
                | LayerPart::KBias
                | LayerPart::QNorm
                | LayerPart::KNorm
        )
    }
}
