//! SentencePiece-style GGUF vocabularies (`tokenizer.ggml.model = "llama"`: Gemma 3, Llama 2,
//! TinyLlama) built with the `tokenizers` crate from the file's tokens, scores and token types
//! give exactly the token ids transformers gives (the goldens), and decode back, streaming
//! included, through `▁` and byte-fallback `<0x..>` tokens.
#![cfg(not(target_arch = "wasm32"))]

use std::path::{Path, PathBuf};

use edgefit_engine::gguf::read_tokenizer;
use edgefit_engine::tokenizer::TextStream;
use edgefit_engine::TextTokenizer;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn tokenizer_of(path: &Path) -> Option<TextTokenizer> {
    let file = std::fs::File::open(path).ok()?;
    Some(read_tokenizer(&mut std::io::BufReader::new(file)).unwrap())
}

/// The tiny Gemma 3 GGUF's tokenizer (the file is rebuilt from its `weights.json`).
fn fixture_tokenizer() -> TextTokenizer {
    let bytes = crate::common::fixtures::read("gemma3_gguf", "model.gguf");
    read_tokenizer(&mut std::io::Cursor::new(bytes)).unwrap()
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

/// Streams `ids` through [`TextStream`] and returns the pieces joined.
fn streamed(tok: &TextTokenizer, ids: &[u32]) -> String {
    let mut s = TextStream::default();
    let mut out = String::new();
    for &id in ids {
        let piece = s.push(tok, id).unwrap();
        assert!(
            !piece.contains('\u{FFFD}'),
            "a piece with U+FFFD: {piece:?}"
        );
        out.push_str(&piece);
    }
    out.push_str(&s.flush(tok).unwrap());
    out
}

/// The tiny Gemma 3 fixture (a trained SentencePiece vocabulary of 384 tokens, byte fallback):
/// both golden prompts encode to transformers' ids and decode back.
#[test]
fn the_tiny_gemma_vocabulary_matches_transformers() {
    let dir = root().join("tests/golden/arch/gemma3_gguf");
    let tok = fixture_tokenizer();
    assert_eq!(tok.kind(), "SentencePiece BPE with byte fallback");
    assert!(tok.add_bos());
    assert_eq!(tok.bos_id(), Some(2));
    assert_eq!(tok.bos_text(), "<bos>");
    assert_eq!(tok.eos_text(), "<eos>");
    assert!(tok.is_stop(1), "<eos> stops");
    assert!(tok.is_stop(5), "<end_of_turn> stops");
    assert!(
        tok.has_chat_template(),
        "tokenizer.chat_template from the file"
    );
    let golden = json(&dir.join("golden.json"));
    for case in golden["cases"].as_array().unwrap() {
        let prompt = case["prompt"].as_str().unwrap();
        let want = ids(&case["tokens"]);
        let got = tok.encode(prompt).unwrap();
        println!("{prompt:?}: {got:?}");
        assert_eq!(got, want, "{prompt:?}");
        assert_eq!(tok.decode(&got[1..]).unwrap(), prompt);
        assert_eq!(streamed(&tok, &got[1..]), prompt);
    }
    // Rendered chat text already starting with <bos> gets no second one.
    let chat = tok.apply_chat_template("Hi").unwrap();
    let chat_ids = tok.encode(&chat).unwrap();
    assert_eq!(chat_ids.iter().filter(|&&i| i == 2).count(), 1, "{chat:?}");
}

/// Characters outside the vocabulary go through byte-fallback tokens `<0x..>`, which decode
/// (and stream, one whole character at a time) back to the text.
#[test]
fn byte_fallback_tokens_round_trip_and_stream() {
    let tok = fixture_tokenizer();
    let text = "Zoë sends 🦀 and 東京 over\nthe line";
    let ids = tok.encode(text).unwrap();
    let texts: Vec<String> = ids.iter().map(|&i| tok.token_text(i).unwrap()).collect();
    let bytes = texts.iter().filter(|t| t.starts_with("<0x")).count();
    println!("{} tokens, {bytes} byte-fallback: {texts:?}", ids.len());
    // 🦀 (4 bytes) and 東京 (3 + 3) are not in a 384-token vocabulary.
    assert!(bytes >= 10, "{texts:?}");
    assert!(texts.iter().any(|t| t.starts_with('\u{2581}')), "{texts:?}");
    assert_eq!(tok.decode(&ids[1..]).unwrap(), text);
    assert_eq!(streamed(&tok, &ids[1..]), text);
}

/// The real Gemma 3 270M file (262,144 tokens): every golden prompt (plain and chat-rendered)
/// encodes to transformers' ids and token strings exactly.
#[test]
fn the_gemma3_270m_vocabulary_matches_transformers() {
    let path = root().join("models/gemma3-270m-it-q4_k_m.gguf");
    let Some(tok) = tokenizer_of(&path) else {
        println!(
            "SKIPPED: {} is absent (`cargo xtask setup --gemma` fetches it)",
            path.display()
        );
        return;
    };
    assert_eq!(tok.vocab_size(), 262_144);
    let golden = json(&root().join("tests/golden/gemma3-270m.json"));
    let mut n = 0;
    for case in golden["cases"].as_array().unwrap() {
        let text = case["rendered"].as_str().unwrap();
        let want = ids(&case["tokens"]);
        let got = tok.encode(text).unwrap();
        assert_eq!(got, want, "{}: {text:?}", case["name"]);
        let strings: Vec<String> = got.iter().map(|&i| tok.token_text(i).unwrap()).collect();
        let want_strings: Vec<String> = case["token_strings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect();
        assert_eq!(strings, want_strings, "{}", case["name"]);
        n += 1;
    }
    println!("{n} prompts: token ids and strings equal transformers'");
    assert!(n > 0);
}

/// GGUF export writes byte-level BPE only: a SentencePiece tokenizer is refused by name.
#[test]
fn gguf_export_of_a_sentencepiece_tokenizer_is_refused() {
    let tok = fixture_tokenizer();
    let err = edgefit_engine::export::gguf_tokenizer_fields(&tok).unwrap_err();
    println!("{err}");
    assert!(err.to_string().contains("pre-tokenizer"), "{err}");
}
