"""The catalog on disk and its BM25 search: one SQLite file per catalog, with an FTS5 index.

``open_catalog(size, seed)`` returns a ``Catalog`` backed by
``<cache>/catalog-<size>-s<seed>-v<version>.sqlite``, building it on first use (atomically: the
file is written under a temporary name and renamed, so parallel workers never read half a file).
The cache folder is ``$TURNGYM_CACHE_DIR/shop`` or ``$XDG_CACHE_HOME/turngym/shop`` or
``~/.cache/turngym/shop``.

Search follows WebShop: BM25 over title, description, first bullet point and option values
(SQLite FTS5 ``bm25()``, porter stemming), the query's words OR-ed together, top 50 hits.
"""

from __future__ import annotations

import json
import math
import os
import re
import sqlite3
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from turngym.envs.shop.catalog import catalog_size, generate_catalog, load_webshop_json

INDEX_VERSION = 1
TOP_K = 50
POSTINGS_FROM = 5_000  # catalogs this large rank with numpy over the FTS5 postings (same formula)
BM25_K1, BM25_B = 1.2, 0.75  # FTS5's bm25() constants
_WORD = re.compile(r"[a-z0-9]+")
# Lucene's English stop words (WebShop's search engine drops them too).
STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there "
    "these they this to was will with i me my we our you your need want looking find buy".split())


def _varints(blob: bytes) -> list[int]:
    """FTS5's docsize record: one varint token count per column."""
    out, value = [], 0
    for byte in blob:
        if byte & 0x80:
            value = (value << 7) | (byte & 0x7F)
        else:
            out.append((value << 7) | byte)
            value = 0
    return out


def cache_dir() -> Path:
    if os.environ.get("TURNGYM_CACHE_DIR"):
        root = Path(os.environ["TURNGYM_CACHE_DIR"])
    else:
        root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "turngym"
    return root / "shop"


def query_terms(keywords: str) -> list[str]:
    """The words a search uses: lower-cased alphanumeric runs minus stop words, in order, unique."""
    seen: dict[str, None] = {}
    for w in _WORD.findall(keywords.lower()):
        if w not in STOP_WORDS:
            seen.setdefault(w, None)
    return list(seen)


def _doc_fields(p: dict[str, Any]) -> tuple[str, str, str, str]:
    options = " ".join(v for values in p["options"].values() for v in values)
    bullet = p["bullet_points"][0] if p["bullet_points"] else ""
    return p["title"], p["description"], bullet, options


def build_store(path: Path, products: list[dict[str, Any]], goals: list[dict] | None = None,
                meta: dict[str, Any] | None = None) -> None:
    """Write products (+ optional human goals) and their FTS5 index to ``path`` atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        con = sqlite3.connect(tmp)
        con.executescript("""
            PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;
            CREATE TABLE products(id INTEGER PRIMARY KEY, asin TEXT UNIQUE NOT NULL, data TEXT NOT NULL);
            CREATE TABLE goals(id INTEGER PRIMARY KEY, data TEXT NOT NULL);
            CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
            CREATE VIRTUAL TABLE docs USING fts5(title, description, bullet, options, content='',
                                                 tokenize='porter unicode61');
        """)
        con.executemany("INSERT INTO products VALUES (?, ?, ?)",
                        ((i, p["asin"], json.dumps(p, ensure_ascii=False)) for i, p in enumerate(products)))
        con.executemany("INSERT INTO docs(rowid, title, description, bullet, options) VALUES (?, ?, ?, ?, ?)",
                        ((i, *_doc_fields(p)) for i, p in enumerate(products)))
        con.executemany("INSERT INTO goals VALUES (?, ?)",
                        ((i, json.dumps(g, ensure_ascii=False)) for i, g in enumerate(goals or [])))
        info = {"version": INDEX_VERSION, "size": len(products), **(meta or {})}
        con.executemany("INSERT INTO meta VALUES (?, ?)", ((k, json.dumps(v)) for k, v in info.items()))
        con.execute("INSERT INTO docs(docs) VALUES ('optimize')")
        con.commit()
        con.close()
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


class Catalog:
    """Read-only access to a stored catalog: products by row or asin, BM25 search, human goals.

    Cheap to open (nothing is loaded up front); products are read on demand and memoised.
    One instance may be shared by the threads of one process (reads take a lock).
    """

    def __init__(self, path: str | Path, name: str = ""):
        self.path = Path(path)
        self.name = name or self.path.stem
        self._con = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
        self._lock = threading.Lock()
        rows = self._con.execute("SELECT key, value FROM meta").fetchall()
        self.meta = {k: json.loads(v) for k, v in rows}
        self.size = int(self.meta["size"])
        self._by_id: dict[int, dict] = {}
        self._asin_id: dict[str, int] = {}
        self._search_cache: OrderedDict[tuple[str, ...], list[str]] = OrderedDict()
        self._num_goals: int | None = None
        self._doclen = None
        self._norm = None
        self._postings_cache: dict[str, tuple[Any, Any]] = {}

    def product_at(self, index: int) -> dict[str, Any]:
        p = self._by_id.get(index)
        if p is None:
            with self._lock:
                row = self._con.execute("SELECT data FROM products WHERE id = ?", (index,)).fetchone()
            if row is None:
                raise IndexError(f"product index {index} out of range 0..{self.size - 1}")
            p = json.loads(row[0])
            if len(self._by_id) >= 20_000:  # bound the memo on big catalogs
                self._by_id.clear()
            self._by_id[index] = p
            self._asin_id[p["asin"]] = index
        return p

    def product(self, asin: str) -> dict[str, Any] | None:
        """The product with this asin (case-insensitive), or None."""
        asin = asin.upper()
        index = self._asin_id.get(asin)
        if index is None:
            with self._lock:
                row = self._con.execute("SELECT id FROM products WHERE asin = ?", (asin,)).fetchone()
            if row is None:
                return None
            index = row[0]
        return self.product_at(index)

    def search(self, keywords: str, top_k: int = TOP_K, cache: bool = True, engine: str = "auto") -> list[str]:
        """Asins of the ``top_k`` best BM25 matches, best first (ties broken by catalog order).

        Results are memoised per set of query words (LRU, 4096 queries) unless ``cache=False``.
        ``engine``: "fts5" ranks with FTS5's ``bm25()`` in SQL; "postings" evaluates the same
        formula in numpy over the same FTS5 index (FTS5 spends about 0.7 us per matching row in
        ``bm25()``, which a 100k catalog's common words make tens of milliseconds); "auto" uses
        "fts5" up to ``POSTINGS_FROM`` products and "postings" above.
        """
        terms = tuple(query_terms(keywords))
        if not terms:
            return []
        if engine == "auto":
            engine = "fts5" if self.size < POSTINGS_FROM else "postings"
        key = (engine, *terms)
        hit = self._search_cache.get(key) if cache else None
        if hit is not None:
            self._search_cache.move_to_end(key)
            return hit[:top_k]
        limit = max(top_k, TOP_K)
        with self._lock:
            if engine == "fts5":
                match = " OR ".join(f'"{t}"' for t in terms)
                rows = self._con.execute(
                    "SELECT docs.rowid, products.asin FROM docs JOIN products ON products.id = docs.rowid "
                    "WHERE docs MATCH ? ORDER BY bm25(docs), docs.rowid LIMIT ?", (match, limit)).fetchall()
            elif engine == "postings":
                ids = self._rank_postings(terms, limit)
                found = dict(self._con.execute(
                    f"SELECT id, asin FROM products WHERE id IN ({','.join('?' * len(ids))})", ids).fetchall())
                rows = [(i, found[i]) for i in ids]
            else:
                raise ValueError(f"engine: {engine!r}; allowed: 'auto', 'fts5', 'postings'")
        asins = [a for _, a in rows]
        for i, a in rows:
            self._asin_id[a] = i
        self._search_cache[key] = asins
        if len(self._search_cache) > 4096:
            self._search_cache.popitem(last=False)
        return asins[:top_k]

    # FTS5's bm25(): for each query term t with n_t matching rows out of N,
    #   idf_t = log((N - n_t + 0.5) / (n_t + 0.5)), or 1e-6 when that is <= 0
    #   score = sum_t idf_t * tf_t * (k1 + 1) / (tf_t + k1 * (1 - b + b * D / avgdl))
    # with tf_t the term's count in the row (all columns), D the row's token count, k1=1.2, b=0.75.
    def _rank_postings(self, terms: tuple[str, ...], limit: int) -> list[int]:
        import numpy as np

        if self._doclen is None:
            self._load_doclen()
        scores = np.zeros(self.size, dtype=np.float64)
        touched = []
        for term in terms:
            docs, tf = self._postings(term)
            if len(docs) == 0:
                continue
            idf = math.log((self.size - len(docs) + 0.5) / (len(docs) + 0.5))
            if idf <= 0.0:
                idf = 1e-6
            scores[docs] += idf * (tf * (BM25_K1 + 1.0)) / (tf + BM25_K1 * self._norm[docs])
            touched.append(docs)
        if not touched:
            return []
        candidates = np.flatnonzero(scores)  # every matching row has a score > 0 (idf >= 1e-6)
        cand_scores = scores[candidates]
        if len(candidates) > limit:  # keep every row tied with the limit-th score, then sort exactly
            kth = np.partition(-cand_scores, limit - 1)[limit - 1]
            keep = -cand_scores <= kth
            candidates, cand_scores = candidates[keep], cand_scores[keep]
        order = np.lexsort((candidates, -cand_scores))[:limit]
        return [int(i) for i in candidates[order]]

    def _load_doclen(self) -> None:
        import numpy as np

        self._con.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.docs_instance USING fts5vocab(main, docs, 'instance')")
        self._con.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.stem USING fts5(w, tokenize='porter unicode61')")
        self._con.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.stem_vocab USING fts5vocab(temp, stem, 'row')")
        lengths = np.zeros(self.size, dtype=np.float64)
        for rowid, blob in self._con.execute("SELECT id, sz FROM docs_docsize"):
            lengths[rowid] = sum(_varints(blob))
        avgdl = lengths.sum() / self.size
        self._norm = 1.0 - BM25_B + BM25_B * lengths / avgdl
        self._doclen = lengths

    def _postings(self, word: str):
        import numpy as np

        hit = self._postings_cache.get(word)
        if hit is None:
            # the index holds porter stems: let FTS5's own tokenizer stem the word
            self._con.execute("DELETE FROM temp.stem")
            self._con.execute("INSERT INTO temp.stem(w) VALUES (?)", (word,))
            stems = [r[0] for r in self._con.execute("SELECT term FROM temp.stem_vocab")]
            rows = self._con.execute("SELECT doc, count(*) FROM temp.docs_instance WHERE term = ? GROUP BY doc",
                                     (stems[0] if stems else word,)).fetchall() if stems else []
            docs = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
            tf = np.fromiter((r[1] for r in rows), dtype=np.float64, count=len(rows))
            hit = self._postings_cache[word] = (docs, tf)
        return hit

    def num_human_goals(self) -> int:
        if self._num_goals is None:
            with self._lock:
                self._num_goals = self._con.execute("SELECT COUNT(*) FROM goals").fetchone()[0]
        return self._num_goals

    def human_goal(self, index: int) -> dict[str, Any]:
        with self._lock:
            row = self._con.execute("SELECT data FROM goals WHERE id = ?", (index,)).fetchone()
        if row is None:
            raise IndexError(f"goal index {index} out of range")
        return json.loads(row[0])

    def close(self) -> None:
        self._con.close()


_OPEN: dict[str, Catalog] = {}
_OPEN_LOCK = threading.Lock()


def open_catalog(size: int | str = "1k", seed: int = 0, path: str | Path | None = None) -> Catalog:
    """The generated catalog of ``size`` products (built and cached on first use), or the stored
    catalog at ``path`` (a ``.sqlite`` made by ``import_webshop``). Shared within a process."""
    if path is not None:
        file = Path(path)
        if not file.exists():
            raise ValueError(f"catalog_path: {str(file)!r} does not exist")
        name = file.stem
    else:
        n = catalog_size(size)
        name = f"catalog-{n}-s{seed}-v{INDEX_VERSION}"
        file = cache_dir() / f"{name}.sqlite"
    key = f"{os.getpid()}:{file}"  # a forked worker opens its own connection
    with _OPEN_LOCK:
        cat = _OPEN.get(key)
        if cat is None:
            if path is None and not file.exists():
                build_store(file, generate_catalog(n, seed), meta={"seed": seed, "source": "generated"})
            cat = _OPEN[key] = Catalog(file, name=name)
        return cat


def import_webshop(out: str | Path, items: str | Path, attributes: str | Path | None = None,
                   human_instructions: str | Path | None = None) -> Path:
    """Store WebShop's JSON files as a catalog file usable as ``catalog_path=``."""
    products, goals = load_webshop_json(items, attributes, human_instructions)
    if not products:
        raise ValueError(f"items: {str(items)!r} holds no product with an asin and a price")
    out = Path(out)
    build_store(out, products, goals, meta={"source": "webshop", "items": str(items)})
    return out
