// A form's validation message shown where the user is looking: in a box beside the button that
// was pressed, the bad input marked (aria-invalid, described by the message) and focused. DOM only;
// the messages themselves are protocol/forms.js's (plain words, the input's own range).

/**
 * `box`: the message element (role="alert", hidden when empty); `inputs`: {field: element} of
 * the form. Returns {show(message, field), clear()}; an input's own edit clears its mark.
 */
export function createFieldError(box, inputs) {
  let marked = null;

  function unmark() {
    if (!marked) return;
    marked.removeAttribute('aria-invalid');
    const ids = (marked.getAttribute('aria-describedby') ?? '').split(/\s+/).filter((id) => id && id !== box.id);
    if (ids.length) marked.setAttribute('aria-describedby', ids.join(' '));
    else marked.removeAttribute('aria-describedby');
    marked = null;
  }

  function clear() {
    unmark();
    box.textContent = '';
    box.hidden = true;
  }

  for (const input of Object.values(inputs)) {
    input?.addEventListener('input', () => {
      if (input === marked) clear();
    });
  }

  return {
    show(message, field) {
      unmark();
      box.textContent = message;
      box.hidden = false;
      const input = field ? inputs[field] : null;
      if (!input) return;
      marked = input;
      input.setAttribute('aria-invalid', 'true');
      const ids = (input.getAttribute('aria-describedby') ?? '').split(/\s+/).filter(Boolean);
      if (!ids.includes(box.id)) input.setAttribute('aria-describedby', [...ids, box.id].join(' '));
      input.focus();
    },
    clear,
  };
}
