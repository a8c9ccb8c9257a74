// Native llama.cpp (npm node-llama-cpp, prebuilt binaries, CPU) on a GGUF at THREADS threads
// (default 1): load time, prefill and decode speed for a fixed prompt and greedy tokens.
//
// usage: node tests/bench/llamacpp.mjs MODEL.gguf PROMPT_FILE TOKENS RUNS [THREADS]
// Prints one JSON object per run on stdout: {load_ms, prompt_tokens, generated_tokens,
// prefill_tok_s, decode_tok_s, threads, version}. Started by `cargo xtask bench e2e`.

import { readFile } from 'node:fs/promises';
import { getLlama } from 'node-llama-cpp';

const [modelPath, promptFile, tokensArg = '128', runsArg = '3', threadsArg = '1'] = process.argv.slice(2);
const threads = Number(threadsArg);
if (!modelPath || !promptFile || !Number.isInteger(threads) || threads < 1) {
  console.error('usage: node llamacpp.mjs MODEL.gguf PROMPT_FILE [TOKENS] [RUNS] [THREADS >= 1]');
  process.exit(2);
}
const prompt = (await readFile(promptFile, 'utf8')).trimEnd();
const maxTokens = Number(tokensArg);
const runs = Number(runsArg);

// build: 'never' uses the prebuilt binary from @node-llama-cpp/<platform> and never compiles or
// downloads anything; gpu: false keeps it on the CPU. maxThreads bounds the whole instance and
// the context's {ideal, min} makes exactly `threads` run (a plain number is only a hint).
const llama = await getLlama({
  build: 'never',
  gpu: false,
  logLevel: 'error',
  progressLogs: false,
  maxThreads: threads,
});

for (let run = 0; run < runs; run++) {
  const t0 = performance.now();
  const model = await llama.loadModel({ modelPath, gpuLayers: 0, useMmap: true });
  const context = await model.createContext({
    contextSize: 512,
    batchSize: 512,
    threads: { ideal: threads, min: threads },
  });
  const loadMs = performance.now() - t0;
  const sequence = context.getSequence();
  const tokens = model.tokenize(prompt);
  const start = performance.now();
  let first = 0;
  let generated = 0;
  for await (const token of sequence.evaluate(tokens, { temperature: 0 })) {
    if (generated === 0) first = performance.now();
    if (model.isEogToken(token)) break;
    generated += 1;
    if (generated >= maxTokens) break;
  }
  const end = performance.now();
  console.log(
    JSON.stringify({
      load_ms: loadMs,
      prompt_tokens: tokens.length,
      generated_tokens: generated,
      prefill_tok_s: tokens.length / ((first - start) / 1000),
      decode_tok_s: generated > 1 ? (generated - 1) / ((end - first) / 1000) : null,
      threads: context.currentThreads ?? null,
      version: llama.llamaCppRelease?.release ?? null,
    }),
  );
  await context.dispose();
  await model.dispose();
}
await llama.dispose();
