// Writes a stable "bid" attribute on every element of the page and of its same-origin iframes
// (an element keeps its bid for the whole episode; "12.3" is element 3 inside iframe 12), hides
// the task's own chrome from the accessibility tree, and lists the frames it could not enter.
(opts) => {
  const ATTR = "bid";
  const crossOrigin = [];
  function mark(doc, prefix) {
    if (opts.reset || doc.__turngymNextBid === undefined) {
      doc.querySelectorAll("[" + ATTR + "]").forEach((el) => el.removeAttribute(ATTR));
      doc.__turngymNextBid = 1;
    }
    for (const el of doc.querySelectorAll("*")) {
      if (!el.hasAttribute(ATTR)) el.setAttribute(ATTR, prefix + doc.__turngymNextBid++);
    }
    for (const sel of opts.hide || []) {
      doc.querySelectorAll(sel).forEach((el) => el.setAttribute("aria-hidden", "true"));
    }
    for (const frame of doc.querySelectorAll("iframe, frame")) {
      let inner = null;
      try { inner = frame.contentDocument; } catch (e) { inner = null; }
      if (inner && inner.documentElement) mark(inner, frame.getAttribute(ATTR) + ".");
      else crossOrigin.push(frame.getAttribute(ATTR));
    }
  }
  mark(document, opts.prefix || "");
  if (!window.__turngymHooked) {  // lets the env notice a navigation the last action started
    window.__turngymHooked = true;
    window.addEventListener("beforeunload", () => { window.__turngymLeaving = true; });
  }
  return { url: location.href, cross_origin_frames: crossOrigin };
}
