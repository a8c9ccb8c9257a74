//! Text ↔ token ids, built with the `tokenizers` crate from a GGUF's own tokenizer fields or an
//! HF `tokenizer.json`, plus the chat template (rendered with minijinja, as HF renders Jinja
//! templates: `trim_blocks` and `lstrip_blocks` on, Python string methods available).
//!
//! Two GGUF vocabulary kinds (`tokenizer.ggml.model`):
//! - `gpt2`: byte-level BPE from `tokens` and `merges`, with the pre-tokenizer
//!   `tokenizer.ggml.pre` names (`default`/`gpt2`, `smollm`, `llama3`/`llama-bpe`, `qwen2`).
//! - `llama`: a SentencePiece vocabulary (Gemma, Llama 2, TinyLlama) from `tokens`, `scores` and
//!   `token_type`, built as HF's `convert_slow_tokenizer` builds it: a BPE model with byte
//!   fallback (`<0x00>`..`<0xFF>`) and `unk` whose merges come from the scores — every split
//!   `(a, b)` of a token `t` with `a` and `b` in the vocabulary is a merge, ranked by `t`'s score
//!   (highest first; ties in vocabulary order), which merges the pair whose concatenation scores
//!   highest, as SentencePiece does. The normalizer replaces `' '` with `▁` (and prepends `▁`
//!   when `tokenizer.ggml.add_space_prefix`, llama.cpp's default for this kind, is on); no
//!   pre-tokenizer splits the text; the decoder maps `▁` back to `' '`, byte tokens back to
//!   bytes (fused, invalid UTF-8 as U+FFFD), and strips the prepended space. Control tokens
//!   (type 3) are special, user-defined ones (type 4) matched literally in the raw text;
//!   `tokenizer.ggml.pre` may be absent, `default` or `gemma`.

use serde::Serialize;
use tokenizers::decoders::byte_fallback::ByteFallback;
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::decoders::fuse::Fuse;
use tokenizers::decoders::sequence::Sequence as DecoderSequence;
use tokenizers::decoders::strip::Strip;
use tokenizers::decoders::DecoderWrapper;
use tokenizers::models::bpe::BPE;
use tokenizers::normalizers::{Prepend, Replace};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::NormalizerWrapper;
use tokenizers::{AddedToken, SplitDelimiterBehavior, Tokenizer};

use crate::error::{EngineError, Result};

/// GGUF `tokenizer.ggml.token_type` values.
const TOKEN_TYPE_UNKNOWN: i32 = 2;
const TOKEN_TYPE_CONTROL: i32 = 3;
const TOKEN_TYPE_USER_DEFINED: i32 = 4;

/// End-of-turn markers of common chat formats: generation stops on any of them that the
/// vocabulary has, besides the declared end-of-sequence token.
const STOP_TEXTS: [&str; 6] = [
    "<|im_end|>",
    "<|endoftext|>",
    "<|eot_id|>",
    "<|end|>",
    "</s>",
    "<end_of_turn>",
];

/// The GPT-2 regex, used by `gpt2`/`default` and (after splitting digits) `smollm`.
const LLAMA3_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN2_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// The tokenizer fields of a GGUF file, as the loader reads them.
#[derive(Debug, Clone, Default)]
pub struct GgufTokenizerFields {
    /// `tokenizer.ggml.model`, e.g. `gpt2`.
    pub model: String,
    /// `tokenizer.ggml.pre`, e.g. `smollm`; empty when absent.
    pub pre: String,
    pub tokens: Vec<String>,
    pub token_types: Vec<i32>,
    pub merges: Vec<String>,
    /// `tokenizer.ggml.scores` (SentencePiece vocabularies); empty when absent.
    pub scores: Vec<f32>,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    /// `tokenizer.ggml.eot_token_id` (end of turn), a stop token when present.
    pub eot: Option<u32>,
    /// `tokenizer.ggml.eom_token_id` (end of message: Llama 3.x's `<|eom_id|>` after a tool
    /// call), a stop token when present.
    pub eom: Option<u32>,
    /// `tokenizer.ggml.unknown_token_id`.
    pub unk: Option<u32>,
    pub add_bos: bool,
    /// `tokenizer.ggml.add_space_prefix`; `None` when absent.
    pub add_space_prefix: Option<bool>,
    pub chat_template: Option<String>,
}

/// A tokenizer plus what generation needs around it: BOS handling, stop tokens, chat template.
#[derive(Debug, Clone)]
pub struct TextTokenizer {
    inner: Tokenizer,
    kind: String,
    bos: Option<u32>,
    add_bos: bool,
    stop_ids: Vec<u32>,
    chat_template: Option<String>,
    bos_text: String,
    eos_text: String,
}

/// Summary for the page and the CLI.
#[derive(Debug, Clone, Serialize)]
pub struct TokenizerInfo {
    /// What the vocabulary is: `byte-level BPE (smollm)`, `SentencePiece BPE with byte
    /// fallback`, or `tokenizer.json (BPE)` for an HF file.
    pub kind: String,
    pub vocab: usize,
    pub add_bos: bool,
    pub stop_ids: Vec<u32>,
    pub chat_template: bool,
}

fn tok_err(e: impl std::fmt::Display) -> EngineError {
    EngineError::Tokenizer(e.to_string())
}

impl TextTokenizer {
    /// Builds a byte-level BPE tokenizer from GGUF fields. Supported `tokenizer.ggml.model`:
    /// `gpt2`; supported `tokenizer.ggml.pre`: `default`, `gpt2`, `smollm`, `llama3`,
    /// `llama-bpe`, `qwen2`.
    pub fn from_gguf(f: GgufTokenizerFields) -> Result<Self> {
        if f.model != "gpt2" && f.model != "llama" {
            return Err(EngineError::Unsupported(format!(
                "tokenizer model `{}` (supported: `gpt2`, byte-level BPE; `llama`, SentencePiece)",
                f.model
            )));
        }
        if f.tokens.is_empty() {
            return Err(EngineError::metadata("tokenizer.ggml.tokens", "is empty"));
        }
        if !f.token_types.is_empty() && f.token_types.len() != f.tokens.len() {
            return Err(EngineError::metadata(
                "tokenizer.ggml.token_type",
                format!(
                    "has {} entries for {} tokens",
                    f.token_types.len(),
                    f.tokens.len()
                ),
            ));
        }
        let n = f.tokens.len();
        for (key, id) in [
            ("tokenizer.ggml.bos_token_id", f.bos),
            ("tokenizer.ggml.eos_token_id", f.eos),
            ("tokenizer.ggml.eot_token_id", f.eot),
            ("tokenizer.ggml.eom_token_id", f.eom),
            ("tokenizer.ggml.unknown_token_id", f.unk),
        ] {
            if let Some(id) = id {
                if id as usize >= n {
                    return Err(EngineError::metadata(
                        key,
                        format!("{id} is not below the vocabulary size {n}"),
                    ));
                }
            }
        }
        if f.model == "llama" {
            return Self::from_gguf_spm(f);
        }
        let mut vocab = tokenizers::models::bpe::Vocab::default();
        for (i, t) in f.tokens.iter().enumerate() {
            vocab.entry(t.clone()).or_insert(i as u32);
        }
        let mut merges = Vec::with_capacity(f.merges.len());
        for (i, m) in f.merges.iter().enumerate() {
            let Some((a, b)) = m.split_once(' ') else {
                return Err(EngineError::metadata(
                    "tokenizer.ggml.merges",
                    format!("entry {i} `{m}` is not two tokens separated by a space"),
                ));
            };
            merges.push((a.to_string(), b.to_string()));
        }
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .build()
            .map_err(|e| {
                EngineError::Tokenizer(format!(
                    "`tokenizer.ggml.tokens` and `tokenizer.ggml.merges` do not make a BPE vocabulary: {e}"
                ))
            })?;
        let byte_level =
            |use_regex| PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, true, use_regex));
        let split = |re: &str| -> Result<PreTokenizerWrapper> {
            Ok(PreTokenizerWrapper::Split(
                Split::new(
                    SplitPattern::Regex(re.to_string()),
                    SplitDelimiterBehavior::Isolated,
                    false,
                )
                .map_err(tok_err)?,
            ))
        };
        let pre = match f.pre.as_str() {
            "" | "default" | "gpt2" => byte_level(true),
            "smollm" => PreTokenizerWrapper::Sequence(Sequence::new(vec![
                PreTokenizerWrapper::Digits(Digits::new(true)),
                byte_level(true),
            ])),
            "llama3" | "llama-bpe" => {
                PreTokenizerWrapper::Sequence(Sequence::new(vec![split(LLAMA3_REGEX)?, byte_level(false)]))
            }
            "qwen2" => PreTokenizerWrapper::Sequence(Sequence::new(vec![split(QWEN2_REGEX)?, byte_level(false)])),
            other => {
                return Err(EngineError::Unsupported(format!(
                    "pre-tokenizer `{other}` (supported: default, gpt2, smollm, llama3, llama-bpe, qwen2)"
                )))
            }
        };
        let mut inner = Tokenizer::new(bpe);
        inner.with_pre_tokenizer(Some(pre));
        inner.with_decoder(Some(ByteLevelDecoder::default()));
        let kind = format!(
            "byte-level BPE ({})",
            if f.pre.is_empty() { "default" } else { &f.pre }
        );
        Self::finish(inner, kind, f, false)
    }

    /// The `llama` (SentencePiece) kind: see the module docs.
    fn from_gguf_spm(f: GgufTokenizerFields) -> Result<Self> {
        if !matches!(f.pre.as_str(), "" | "default" | "gemma") {
            return Err(EngineError::Unsupported(format!(
                "pre-tokenizer `{}` with a SentencePiece (`llama`) vocabulary (supported: default, gemma)",
                f.pre
            )));
        }
        if f.scores.len() != f.tokens.len() {
            return Err(EngineError::metadata(
                "tokenizer.ggml.scores",
                format!(
                    "has {} entries for {} tokens",
                    f.scores.len(),
                    f.tokens.len()
                ),
            ));
        }
        if let Some(bad) = f.scores.iter().position(|s| !s.is_finite()) {
            return Err(EngineError::metadata(
                "tokenizer.ggml.scores",
                format!("score {} of token {bad} is not finite", f.scores[bad]),
            ));
        }
        let mut vocab = tokenizers::models::bpe::Vocab::default();
        for (i, t) in f.tokens.iter().enumerate() {
            vocab.entry(t.clone()).or_insert(i as u32);
        }
        // Merges from the scores (HF's `SentencePieceExtractor`): every split of every token
        // into two tokens, in vocabulary order, then by the left and right ids; ranked by the
        // merged token's score, highest first (a stable sort keeps ties in that order).
        let mut merges: Vec<(f32, &str, &str)> = Vec::new();
        for (t, &score) in f.tokens.iter().zip(&f.scores) {
            let mut local: Vec<(u32, u32, &str, &str)> = Vec::new();
            for (k, _) in t.char_indices().skip(1) {
                let (a, b) = t.split_at(k);
                if let (Some(&ia), Some(&ib)) = (vocab.get(a), vocab.get(b)) {
                    local.push((ia, ib, a, b));
                }
            }
            local.sort_by_key(|&(ia, ib, _, _)| (ia, ib));
            merges.extend(local.into_iter().map(|(_, _, a, b)| (score, a, b)));
        }
        merges.sort_by(|x, y| y.0.total_cmp(&x.0));
        let merges: Vec<(String, String)> = merges
            .into_iter()
            .map(|(_, a, b)| (a.to_string(), b.to_string()))
            .collect();
        let unk = f
            .unk
            .or_else(|| {
                f.token_types
                    .iter()
                    .position(|&t| t == TOKEN_TYPE_UNKNOWN)
                    .map(|i| i as u32)
            })
            .and_then(|i| f.tokens.get(i as usize).cloned());
        let mut builder = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .byte_fallback(true)
            .fuse_unk(true);
        if let Some(unk) = unk {
            builder = builder.unk_token(unk);
        }
        let bpe = builder.build().map_err(|e| {
            EngineError::Tokenizer(format!(
                "`tokenizer.ggml.tokens` and `tokenizer.ggml.scores` do not make a BPE vocabulary: {e}"
            ))
        })?;
        // llama.cpp adds the space prefix unless the file says not to.
        let space_prefix = f.add_space_prefix.unwrap_or(true);
        let replace = Replace::new(" ", "\u{2581}").map_err(tok_err)?;
        let normalizer = if space_prefix {
            NormalizerWrapper::Sequence(tokenizers::normalizers::Sequence::new(vec![
                NormalizerWrapper::Prepend(Prepend::new("\u{2581}".to_string())),
                NormalizerWrapper::Replace(replace),
            ]))
        } else {
            NormalizerWrapper::Replace(replace)
        };
        let mut decoders = vec![
            DecoderWrapper::Replace(Replace::new("\u{2581}", " ").map_err(tok_err)?),
            DecoderWrapper::ByteFallback(ByteFallback::default()),
            DecoderWrapper::Fuse(Fuse::default()),
        ];
        if space_prefix {
            decoders.push(DecoderWrapper::Strip(Strip::new(' ', 1, 0)));
        }
        let mut inner = Tokenizer::new(bpe);
        inner.with_normalizer(Some(normalizer)).map_err(tok_err)?;
        inner.with_decoder(Some(DecoderSequence::new(decoders)));
        Self::finish(
            inner,
            "SentencePiece BPE with byte fallback".to_string(),
            f,
            true,
        )
    }

    /// Adds the special and user-defined tokens, BOS/EOS, stop tokens and the chat template.
    /// `literal`: user-defined tokens match the raw text (not normalized), as llama.cpp cuts
    /// them out before tokenizing.
    fn finish(
        mut inner: Tokenizer,
        kind: String,
        f: GgufTokenizerFields,
        literal: bool,
    ) -> Result<Self> {
        let mut added = Vec::new();
        for (i, t) in f.tokens.iter().enumerate() {
            match f.token_types.get(i).copied() {
                Some(TOKEN_TYPE_CONTROL) => added.push(AddedToken::from(t.clone(), true)),
                Some(TOKEN_TYPE_USER_DEFINED) if literal => {
                    added.push(AddedToken::from(t.clone(), false).normalized(false))
                }
                Some(TOKEN_TYPE_USER_DEFINED) => added.push(AddedToken::from(t.clone(), false)),
                _ => {}
            }
        }
        inner.add_special_tokens(added).map_err(tok_err)?;
        let text_of = |id: Option<u32>| {
            id.and_then(|i| f.tokens.get(i as usize).cloned())
                .unwrap_or_default()
        };
        let bos_text = text_of(f.bos);
        let eos_text = text_of(f.eos);
        let mut stop_ids: Vec<u32> = Vec::new();
        for id in [f.eos, f.eot, f.eom].into_iter().flatten() {
            if !stop_ids.contains(&id) {
                stop_ids.push(id);
            }
        }
        let vocab = inner.get_vocab(true);
        for s in STOP_TEXTS {
            if let Some(&id) = vocab.get(s) {
                if !stop_ids.contains(&id) {
                    stop_ids.push(id);
                }
            }
        }
        Ok(TextTokenizer {
            inner,
            kind,
            bos: f.bos,
            add_bos: f.add_bos,
            stop_ids,
            chat_template: f.chat_template.filter(|t| !t.trim().is_empty()),
            bos_text,
            eos_text,
        })
    }

    /// Loads an HF `tokenizer.json`, with BOS/EOS and the chat template from
    /// `tokenizer_config.json` when given. `eos_from_config`: every id of config.json's
    /// `eos_token_id` (a list for Llama 3.x Instruct), each a stop token.
    pub fn from_hf(
        tokenizer_json: &[u8],
        tokenizer_config: Option<&str>,
        eos_from_config: &[u32],
    ) -> Result<Self> {
        check_tokenizer_json(tokenizer_json)?;
        let inner = Tokenizer::from_bytes(tokenizer_json)
            .map_err(|e| EngineError::Tokenizer(format!("tokenizer.json: {e}")))?;
        let cfg: serde_json::Value = match tokenizer_config {
            Some(s) => serde_json::from_str(s)
                .map_err(|e| EngineError::Tokenizer(format!("tokenizer_config.json: {e}")))?,
            None => serde_json::Value::Null,
        };
        let token_text = |key: &str| -> Option<String> {
            match cfg.get(key)? {
                serde_json::Value::String(s) => Some(s.clone()),
                v => v
                    .get("content")
                    .and_then(|c| c.as_str())
                    .map(str::to_string),
            }
        };
        let vocab = inner.get_vocab(true);
        let bos_text = token_text("bos_token").unwrap_or_default();
        let eos_text = token_text("eos_token").unwrap_or_default();
        let bos = vocab.get(&bos_text).copied();
        let mut stop_ids: Vec<u32> = eos_from_config.to_vec();
        for s in STOP_TEXTS
            .iter()
            .copied()
            .chain(std::iter::once(eos_text.as_str()))
        {
            if let Some(&id) = vocab.get(s) {
                if !stop_ids.contains(&id) {
                    stop_ids.push(id);
                }
            }
        }
        let add_bos = cfg
            .get("add_bos_token")
            .and_then(|v| v.as_bool())
            .unwrap_or(false)
            && bos.is_some();
        let chat_template = cfg
            .get("chat_template")
            .and_then(|v| v.as_str())
            .map(str::to_string);
        let kind = format!(
            "tokenizer.json ({})",
            match inner.get_model() {
                tokenizers::ModelWrapper::BPE(_) => "BPE",
                tokenizers::ModelWrapper::WordPiece(_) => "WordPiece",
                tokenizers::ModelWrapper::WordLevel(_) => "WordLevel",
                tokenizers::ModelWrapper::Unigram(_) => "Unigram",
            }
        );
        Ok(TextTokenizer {
            inner,
            kind,
            bos,
            add_bos,
            stop_ids,
            chat_template,
            bos_text,
            eos_text,
        })
    }

    /// Vocabulary size, special tokens included.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// Refuses a tokenizer that can produce a token id the model has no embedding row for:
    /// every id (special tokens included) must be below `vocab`.
    pub fn check_fits(&self, vocab: usize) -> Result<()> {
        let vocab_map = self.inner.get_vocab(true);
        match vocab_map.iter().max_by_key(|(_, id)| **id) {
            Some((text, &id)) if id as usize >= vocab => Err(EngineError::Config(format!(
                "tokenizer has {} tokens, up to id {id} ({text:?}), but the model's vocabulary is {vocab}",
                vocab_map.len()
            ))),
            _ => Ok(()),
        }
    }

    /// Summary for display.
    pub fn info(&self) -> TokenizerInfo {
        TokenizerInfo {
            kind: self.kind.clone(),
            vocab: self.vocab_size(),
            add_bos: self.add_bos,
            stop_ids: self.stop_ids.clone(),
            chat_template: self.chat_template.is_some(),
        }
    }

    /// True if the model ships a chat template.
    pub fn has_chat_template(&self) -> bool {
        self.chat_template.is_some()
    }

    /// Token ids of `text`, with BOS first when the model asks for it (and the text does not
    /// already start with it, as a rendered chat template may). Special-token text
    /// (`<|im_start|>`) maps to the special token.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let enc = self.inner.encode(text, false).map_err(tok_err)?;
        let mut ids = Vec::with_capacity(enc.len() + 1);
        if self.add_bos && enc.get_ids().first() != self.bos.as_ref() {
            ids.extend(self.bos);
        }
        ids.extend_from_slice(enc.get_ids());
        Ok(ids)
    }

    /// Text of `ids`, special tokens included.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.inner.decode(ids, false).map_err(tok_err)
    }

    /// True if generation should stop at `id`.
    pub fn is_stop(&self, id: u32) -> bool {
        self.stop_ids.contains(&id)
    }

    /// Renders the chat template for one user message, ending with the assistant's turn.
    pub fn apply_chat_template(&self, user: &str) -> Result<String> {
        self.apply_chat_template_messages(&[("user", user.to_string())])
    }

    /// Renders the chat template for a conversation of (role, text) messages, ending with the
    /// assistant's turn.
    pub fn apply_chat_template_messages(&self, messages: &[(&str, String)]) -> Result<String> {
        let Some(template) = &self.chat_template else {
            return Err(EngineError::ChatTemplate(
                "this model has no chat template; generate without chat".to_string(),
            ));
        };
        let mut env = minijinja::Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function(
            "raise_exception",
            |msg: String| -> std::result::Result<String, minijinja::Error> {
                Err(minijinja::Error::new(
                    minijinja::ErrorKind::InvalidOperation,
                    msg,
                ))
            },
        );
        let tmpl = env
            .template_from_str(template)
            .map_err(|e| EngineError::ChatTemplate(e.to_string()))?;
        let messages: Vec<_> = messages
            .iter()
            .map(|(role, content)| minijinja::context! { role => role, content => content })
            .collect();
        tmpl.render(minijinja::context! {
            messages => messages,
            add_generation_prompt => true,
            bos_token => self.bos_text.as_str(),
            eos_token => self.eos_text.as_str(),
        })
        .map_err(|e| EngineError::ChatTemplate(e.to_string()))
    }
}

/// What `tokenizers` would panic on rather than return an error for (found by fuzzing, see
/// crates/engine/tests/it/fuzz_regressions.rs): its `decoder` deserializer `expect`s that the
/// value parses as JSON, so a syntax error inside `"decoder"` panics instead of failing; and its
/// `Precompiled` normalizer `expect`s a well-formed SentencePiece charsmap. So `tokenizer.json`
/// must be valid JSON before `tokenizers` reads it, and a `Precompiled` normalizer (T5-style
/// unigram tokenizers, never a llama-family one) is refused.
fn check_tokenizer_json(bytes: &[u8]) -> Result<()> {
    let value: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|e| EngineError::Tokenizer(format!("tokenizer.json: {e}")))?;
    fn has_precompiled(v: &serde_json::Value) -> bool {
        match v {
            serde_json::Value::Object(m) => {
                m.get("type").and_then(|t| t.as_str()) == Some("Precompiled")
                    || m.values().any(has_precompiled)
            }
            serde_json::Value::Array(a) => a.iter().any(has_precompiled),
            _ => false,
        }
    }
    if value.get("normalizer").is_some_and(has_precompiled) {
        return Err(EngineError::Tokenizer(
            "tokenizer.json: normalizer `Precompiled` (a SentencePiece charsmap) is not supported"
                .to_string(),
        ));
    }
    Ok(())
}

/// Turns a stream of token ids into a stream of text pieces, holding back bytes until they form
/// whole UTF-8 characters (one emoji can span several byte-level tokens).
#[derive(Debug, Clone, Default)]
pub struct TextStream {
    ids: Vec<u32>,
    prefix: usize,
    read: usize,
}

impl TextStream {
    /// Adds `id` and returns the text that became final ("" while a character is incomplete).
    pub fn push(&mut self, tok: &TextTokenizer, id: u32) -> Result<String> {
        self.ids.push(id);
        let before = tok.decode(&self.ids[self.prefix..self.read])?;
        let after = tok.decode(&self.ids[self.prefix..])?;
        if after.len() > before.len() && !after.ends_with('\u{FFFD}') {
            let piece = after.get(before.len()..).unwrap_or_default().to_string();
            self.prefix = self.read;
            self.read = self.ids.len();
            Ok(piece)
        } else {
            Ok(String::new())
        }
    }

    /// Text still held back at the end of a generation (an incomplete character, shown as
    /// U+FFFD).
    pub fn flush(&mut self, tok: &TextTokenizer) -> Result<String> {
        let before = tok.decode(&self.ids[self.prefix..self.read])?;
        let after = tok.decode(&self.ids[self.prefix..])?;
        self.prefix = self.ids.len();
        self.read = self.ids.len();
        Ok(after.get(before.len()..).unwrap_or_default().to_string())
    }
}

impl TextTokenizer {
    /// The tokenizer as an HF `tokenizer.json` string.
    pub fn to_json(&self) -> Result<String> {
        self.inner.to_string(false).map_err(tok_err)
    }

    /// The chat template's source, if the model has one.
    pub fn chat_template(&self) -> Option<&str> {
        self.chat_template.as_deref()
    }

    /// The beginning-of-sequence token's text ("" when unknown).
    pub fn bos_text(&self) -> &str {
        &self.bos_text
    }

    /// The end-of-sequence token's text ("" when unknown).
    pub fn eos_text(&self) -> &str {
        &self.eos_text
    }

    /// The beginning-of-sequence token's id, if known.
    pub fn bos_id(&self) -> Option<u32> {
        self.bos
    }

    /// Whether [`encode`](Self::encode) puts the BOS token first.
    pub fn add_bos(&self) -> bool {
        self.add_bos
    }

    /// Token ids generation stops at (end of sequence first when known).
    pub fn stop_ids(&self) -> &[u32] {
        &self.stop_ids
    }

    /// The id of the token whose text is `text` (special tokens included).
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.inner.token_to_id(text)
    }

    /// The vocabulary text of token `id` (`▁capital`, `<0x0A>`, `<bos>`).
    pub fn token_text(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }

    /// What the vocabulary is (see [`TokenizerInfo::kind`]).
    pub fn kind(&self) -> &str {
        &self.kind
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokenizers::{OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer};

    fn fields(model: &str, pre: &str) -> GgufTokenizerFields {
        GgufTokenizerFields {
            model: model.to_string(),
            pre: pre.to_string(),
            tokens: vec!["a".to_string(), "b".to_string()],
            scores: vec![0.0, -1.0],
            ..GgufTokenizerFields::default()
        }
    }

    /// The pieces the pre-tokenizer of `pre` cuts `text` into.
    fn pieces(pre: &str, text: &str) -> Vec<String> {
        let tok = TextTokenizer::from_gguf(fields("gpt2", pre)).unwrap();
        let mut s = PreTokenizedString::from(text);
        tok.inner
            .get_pre_tokenizer()
            .unwrap()
            .pre_tokenize(&mut s)
            .unwrap();
        s.get_splits(OffsetReferential::Original, OffsetType::Byte)
            .into_iter()
            .map(|(p, _, _)| p.to_string())
            .collect()
    }

    /// `llama-bpe` (Llama 3) groups digits by up to three, `qwen2` keeps each digit alone;
    /// both split words with their leading space (byte-level `Ġ`).
    #[test]
    fn llama_bpe_and_qwen2_pre_tokenizers_split_as_their_regexes() {
        assert_eq!(pieces("llama-bpe", "ab 12345"), ["ab", "Ġ", "123", "45"]);
        assert_eq!(
            pieces("llama3", "ab 12345"),
            pieces("llama-bpe", "ab 12345")
        );
        assert_eq!(
            pieces("qwen2", "ab 12345"),
            ["ab", "Ġ", "1", "2", "3", "4", "5"]
        );
        assert_eq!(pieces("llama-bpe", "I'm here"), ["I", "'m", "Ġhere"]);
    }

    /// A SentencePiece vocabulary takes `default`, `gemma` or no pre-tokenizer name, and refuses
    /// others (and a BPE pre name it does not know) by name.
    #[test]
    fn sentencepiece_pre_names_are_checked() {
        for pre in ["", "default", "gemma"] {
            let tok = TextTokenizer::from_gguf(fields("llama", pre)).unwrap();
            assert_eq!(tok.kind(), "SentencePiece BPE with byte fallback");
        }
        let err = TextTokenizer::from_gguf(fields("llama", "qwen2")).unwrap_err();
        assert!(err.to_string().contains("`qwen2`"), "{err}");
        let err = TextTokenizer::from_gguf(fields("gpt2", "gemma-bpe")).unwrap_err();
        assert!(err.to_string().contains("gemma-bpe"), "{err}");
        let err = TextTokenizer::from_gguf(fields("t5", "")).unwrap_err();
        assert!(err.to_string().contains("`t5`"), "{err}");
        let mut short = fields("llama", "");
        short.scores.pop();
        let err = TextTokenizer::from_gguf(short).unwrap_err();
        assert!(err.to_string().contains("tokenizer.ggml.scores"), "{err}");
    }

    /// With `add_space_prefix` (Llama 2 / TinyLlama style) the text gets a leading `▁`, which
    /// decoding strips again.
    #[test]
    fn space_prefix_is_added_and_stripped() {
        let mut f = fields("llama", "");
        f.tokens = [
            "<unk>",
            "\u{2581}a",
            "\u{2581}",
            "a",
            "b",
            "\u{2581}ab",
            "ab",
        ]
        .map(String::from)
        .to_vec();
        f.scores = vec![0.0, -1.0, -2.0, -3.0, -4.0, -0.5, -0.7];
        f.token_types = vec![2, 1, 1, 1, 1, 1, 1];
        f.add_space_prefix = Some(true);
        let tok = TextTokenizer::from_gguf(f.clone()).unwrap();
        let ids = tok.encode("ab a").unwrap();
        assert_eq!(ids, [5, 1]);
        assert_eq!(tok.decode(&ids).unwrap(), "ab a");
        f.add_space_prefix = Some(false);
        let tok = TextTokenizer::from_gguf(f).unwrap();
        assert_eq!(tok.encode("ab a").unwrap(), [6, 1]);
    }
}
