// edgefit conversation: the transcript the page shows for multi-turn chat, and whether the next
// generation continues it (keep) or starts afresh.
//
// Pure ES module (no DOM, no wasm), unit-tested in tests/web/conversation.test.mjs. The engine
// holds the real conversation (earlier turns, the model's answers, the KV cache); this mirrors
// what the page has sent and received, so the transcript shows what the engine will render.
//
// Turn: {role: 'user' | 'model' | 'note', text, state} ('note': a line of the page's, e.g. the
// chat template switched mid-conversation) where state is 'done', 'streaming' (the answer
// being generated), 'stopped' (the user pressed Stop: the engine keeps the partial answer) or
// 'failed' (the engine refused the turn, e.g. "context full": it is not part of the conversation).

export function createConversation() {
  return { turns: [], freshNext: true };
}

/**
 * Whether the next generation should continue the conversation: the user asked to keep the
 * context and nothing since (a new conversation, a new model, a new KV format) cleared it.
 */
export function keepFor(conv, keepChecked) {
  return Boolean(keepChecked) && !conv.freshNext;
}

/** Clears the transcript; the next generation starts a fresh conversation. */
export function reset(conv) {
  conv.turns = [];
  conv.freshNext = true;
}

/**
 * A new generation begins with `prompt`. Without keep the transcript restarts with this turn.
 * Returns the index of the model's (empty, streaming) answer turn.
 */
export function beginTurn(conv, prompt, keep, chat) {
  if (!keep) conv.turns = [];
  // The engine renders a kept conversation again in the new mode when the chat template is
  // switched (earlier turns as chat messages, or as plain text): the transcript says so.
  if (keep && typeof chat === 'boolean' && typeof conv.chat === 'boolean' && chat !== conv.chat && conv.turns.length) {
    conv.turns.push({
      role: 'note',
      text: chat
        ? 'Chat template on: the earlier turns are read again as chat messages.'
        : 'Chat template off: the earlier turns are read again as plain text.',
      state: 'done',
    });
  }
  if (typeof chat === 'boolean') conv.chat = chat;
  conv.turns.push({ role: 'user', text: String(prompt), state: 'done' });
  conv.turns.push({ role: 'model', text: '', state: 'streaming' });
  conv.freshNext = false;
  return conv.turns.length - 1;
}

/** The answer being generated (the last turn, a streaming model turn), or null. */
export function current(conv) {
  const t = conv.turns[conv.turns.length - 1];
  return t && t.role === 'model' && t.state === 'streaming' ? t : null;
}

/** Appends a piece of the answer being generated; returns the answer turn (or null). */
export function appendAnswer(conv, text) {
  const t = current(conv);
  if (t) t.text += text;
  return t;
}

/** The answer ended: 'stop' | 'length' | 'stopped'. */
export function finishTurn(conv, reason) {
  const t = current(conv);
  if (t) t.state = reason === 'stopped' ? 'stopped' : 'done';
  return t;
}

/**
 * The engine refused or broke off the turn (`message`). The user turn and any partial answer
 * are marked failed; whether the conversation can go on is the engine's to say, so the next
 * generation with keep still asks it to continue (a "context full" will say so again, and
 * "New conversation" starts over).
 */
export function failTurn(conv, message) {
  const t = current(conv);
  if (!t) return null;
  t.state = 'failed';
  t.error = String(message ?? '');
  const u = conv.turns[conv.turns.length - 2];
  if (u && u.role === 'user') u.state = 'failed';
  return t;
}

/** Number of user turns in the transcript that were not refused. */
export function userTurns(conv) {
  return conv.turns.filter((t) => t.role === 'user' && t.state !== 'failed').length;
}
