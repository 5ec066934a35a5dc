// DOM helpers shared by the page's modules.

/** Creates an element with a class and, optionally, text (as textContent,
 * never HTML). */
export function el(tag, className = "", text = "") {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text) node.textContent = text;
  return node;
}

/** Text for screen readers only. */
export function srOnly(text) {
  return el("span", "sr-only", text);
}
