// Writes a stable "bid" attribute on every element (also inside same-origin iframes) and
// returns the text of the accessibility tree, one line per element that carries meaning.
// Roles and names come from Blink itself (element.computedRole / computedName, enabled by
// --enable-blink-features=ComputedAccessibilityInfo), so they are the browser's own.
(opts) => {
  const SKIP_TAGS = new Set(["SCRIPT", "STYLE", "NOSCRIPT", "TEMPLATE", "HEAD", "META", "LINK", "TITLE"]);
  const QUIET = new Set(["", "generic", "none", "presentation", "LineBreak", "group", "Section"]);
  const INTERACTIVE = new Set(["button", "link", "checkbox", "radio", "textbox", "searchbox",
    "combobox", "listbox", "option", "menuitem", "menuitemcheckbox", "menuitemradio", "tab",
    "treeitem", "switch", "slider", "spinbutton"]);
  const ATTR = "bid";
  const hide = opts.hide || [];
  const lines = [];
  const clickable = [];
  const fillable = [];
  const crossOrigin = [];
  const clean = (s) => (s || "").replace(/\s+/g, " ").trim();
  const quote = (s) => JSON.stringify(s.length > 200 ? s.slice(0, 200) + "..." : s);

  function markAll(doc, prefix) {
    if (opts.reset || doc.__turngymNextBid === undefined) {
      doc.querySelectorAll("[" + ATTR + "]").forEach((el) => el.removeAttribute(ATTR));
      doc.__turngymNextBid = 1;
    }
    for (const el of doc.querySelectorAll("*")) {
      if (!el.hasAttribute(ATTR)) el.setAttribute(ATTR, prefix + doc.__turngymNextBid++);
    }
  }

  function ownText(el) {
    let out = "";
    for (const child of el.childNodes) if (child.nodeType === 3) out += " " + child.data;
    return clean(out);
  }

  function walk(el, depth) {
    if (SKIP_TAGS.has(el.tagName)) return;
    if (el.getAttribute("aria-hidden") === "true") return;
    for (const sel of hide) if (el.matches(sel)) return;
    // options of a closed <select> are not rendered but are what the agent can choose from
    const inSelect = el.tagName === "OPTION" || el.tagName === "OPTGROUP";
    if (!inSelect && el.checkVisibility && !el.checkVisibility({ visibilityProperty: true }) &&
        getComputedStyle(el).display !== "contents") return;
    const bid = el.getAttribute(ATTR);
    let role = el.computedRole || "";
    const name = clean(el.computedName || "");
    const text = ownText(el);
    const tag = el.tagName;
    const isFrame = tag === "IFRAME" || tag === "FRAME";
    const editable = tag === "INPUT" || tag === "TEXTAREA" || el.isContentEditable;
    const show = !QUIET.has(role) || text || isFrame || el.hasAttribute("onclick") || editable;
    let childDepth = depth;
    if (show) {
      if (!role) role = isFrame ? "iframe" : tag.toLowerCase();
      let line = "  ".repeat(depth) + "[" + bid + "] " + role;
      if (name) line += " " + quote(name);
      const props = [];
      if (tag === "INPUT" && (el.type === "checkbox" || el.type === "radio")) {
        props.push(el.checked ? "checked" : "unchecked");
      } else if (editable && tag !== "SELECT") {
        const value = tag === "INPUT" || tag === "TEXTAREA" ? el.value : el.textContent;
        if (value) props.push("value=" + quote(value));
        if (el.placeholder && el.placeholder !== name) props.push("placeholder=" + quote(el.placeholder));
      }
      if (tag === "SELECT") props.push("value=" + quote(el.value || ""));
      if (tag === "OPTION" && el.selected) props.push("selected");
      if (el.disabled) props.push("disabled");
      const expanded = el.getAttribute("aria-expanded");
      if (expanded) props.push("expanded=" + expanded);
      if (el.ownerDocument.activeElement === el && el !== el.ownerDocument.body) props.push("focused");
      if (props.length) line += " [" + props.join(", ") + "]";
      if (text && !name.includes(text)) line += ": " + (text.length > 300 ? text.slice(0, 300) + "..." : text);
      lines.push(line);
      childDepth = depth + 1;
      if (INTERACTIVE.has(role) || el.hasAttribute("onclick") || text) clickable.push(bid);
      if (editable && tag !== "SELECT" && !["checkbox", "radio", "button", "submit", "range", "color"].includes(el.type)) {
        fillable.push(bid);
      }
    }
    if (isFrame) {
      let inner = null;
      try { inner = el.contentDocument; } catch (e) { inner = null; }
      if (inner && inner.documentElement) {
        markAll(inner, bid + ".");
        walk(inner.documentElement, childDepth);
      } else {
        crossOrigin.push(bid);
        lines.push("  ".repeat(childDepth) + "(cross-origin frame " + bid + ")");
      }
      return;
    }
    for (const child of el.children) walk(child, childDepth);
    if (el.shadowRoot) for (const child of el.shadowRoot.children) walk(child, childDepth);
  }

  markAll(document, opts.prefix || "");
  walk(document.documentElement, 0);
  const active = document.activeElement;
  return {
    url: location.href,
    title: document.title,
    tree: lines.join("\n"),
    clickable: clickable,
    fillable: fillable,
    cross_origin_frames: crossOrigin,
    focused: active && active !== document.body ? active.getAttribute(ATTR) : null,
  };
}
