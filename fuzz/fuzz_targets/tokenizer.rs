//! Tokenizer data: the first byte picks the source.
//! * even: an HF `tokenizer.json` with a `tokenizer_config.json`
//!   (`[0][u16 LE length][tokenizer_config.json][tokenizer.json]`, `TextTokenizer::from_hf`);
//! * odd: the GGUF tokenizer fields (`TextTokenizer::from_gguf`) as JSON (`[1][fields JSON]`,
//!   see [`Fields`]), the form the GGUF loader hands over.
//!
//! A tokenizer that builds then encodes, decodes (also ids past the vocabulary) and renders its
//! chat template (a template from the file: minijinja must not hang or panic on it).
#![no_main]

use edgefit_engine::synthetic::{hf_files, vocab};
use edgefit_engine::tokenizer::GgufTokenizerFields;
use edgefit_engine::TextTokenizer;
use libfuzzer_sys::fuzz_target;
use serde::{Deserialize, Serialize};

/// `GgufTokenizerFields` in a JSON form.
#[derive(Serialize, Deserialize)]
struct Fields {
    model: String,
    pre: String,
    tokens: Vec<String>,
    token_types: Vec<i32>,
    merges: Vec<String>,
    /// SentencePiece-style (`model = "llama"`) vocabularies rank their merges by these.
    #[serde(default)]
    scores: Vec<f32>,
    bos: Option<u32>,
    eos: Option<u32>,
    #[serde(default)]
    eot: Option<u32>,
    #[serde(default)]
    eom: Option<u32>,
    #[serde(default)]
    unk: Option<u32>,
    add_bos: bool,
    #[serde(default)]
    add_space_prefix: Option<bool>,
    chat_template: Option<String>,
}

const TEMPLATE: &str = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

fn seeds() -> Vec<(String, Vec<u8>)> {
    let (_, tok, tok_cfg, _) = hf_files(7).expect("synthetic HF files");
    let mut hf = vec![0u8];
    hf.extend(edgefit_fuzz::join(tok_cfg.as_bytes(), tok.as_bytes()));
    let tokens = vocab();
    let fields = Fields {
        model: "gpt2".into(),
        pre: "smollm".into(),
        token_types: (0..tokens.len())
            .map(|i| if i < 3 { 3 } else { 1 })
            .collect(),
        tokens,
        merges: vec!["Ġ t".into(), "h e".into(), "Ġt he".into()],
        scores: Vec::new(),
        bos: Some(1),
        eos: Some(2),
        eot: None,
        eom: None,
        unk: None,
        add_bos: true,
        add_space_prefix: None,
        chat_template: Some(TEMPLATE.into()),
    };
    let mut gguf = vec![1u8];
    gguf.extend(serde_json::to_vec(&fields).expect("fields JSON"));
    // A SentencePiece-style vocabulary: scores rank the merges, `<0x..>` byte fallback, `▁`.
    let mut spm_tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
    spm_tokens.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
    spm_tokens.extend(["▁", "t", "h", "e", "▁t", "he", "▁the"].map(String::from));
    let n = spm_tokens.len();
    let spm = Fields {
        model: "llama".into(),
        pre: "default".into(),
        token_types: (0..n)
            .map(|i| match i {
                0 => 2,
                1 | 2 => 3,
                3..=258 => 6,
                _ => 1,
            })
            .collect(),
        scores: (0..n).map(|i| -(i as f32)).collect(),
        tokens: spm_tokens,
        merges: Vec::new(),
        bos: Some(1),
        eos: Some(2),
        eot: None,
        eom: None,
        unk: Some(0),
        add_bos: true,
        add_space_prefix: Some(true),
        chat_template: None,
    };
    let mut spm_bytes = vec![1u8];
    spm_bytes.extend(serde_json::to_vec(&spm).expect("fields JSON"));
    vec![
        ("synthetic-hf.tok".into(), hf),
        ("synthetic-gguf.tok".into(), gguf),
        ("synthetic-spm.tok".into(), spm_bytes),
    ]
}

fn build(data: &[u8]) -> Option<TextTokenizer> {
    let (&mode, rest) = data.split_first()?;
    if mode % 2 == 0 {
        let (cfg, json) = edgefit_fuzz::split(rest);
        let cfg = std::str::from_utf8(cfg).ok()?;
        TextTokenizer::from_hf(json, Some(cfg), &[]).ok()
    } else {
        let f: Fields = serde_json::from_slice(rest).ok()?;
        TextTokenizer::from_gguf(GgufTokenizerFields {
            model: f.model,
            pre: f.pre,
            tokens: f.tokens,
            token_types: f.token_types,
            merges: f.merges,
            scores: f.scores,
            bos: f.bos,
            eos: f.eos,
            eot: f.eot,
            eom: f.eom,
            unk: f.unk,
            add_bos: f.add_bos,
            add_space_prefix: f.add_space_prefix,
            chat_template: f.chat_template,
        })
        .ok()
    }
}

fuzz_target!(
    init: edgefit_fuzz::write_seeds_if_asked(seeds),
    |data: &[u8]| {
        let Some(tok) = build(data) else {
            return;
        };
        if let Ok(ids) = tok.encode("the cat <|im_end|> 東京😀") {
            let _ = tok.decode(&ids);
        }
        let n = tok.vocab_size() as u32;
        let _ = tok.decode(&[0, n.saturating_sub(1), n, u32::MAX]);
        let _ = tok.apply_chat_template("hi");
        let _ = tok.info();
        let _ = tok.to_json();
    }
);
