"""Shop: a WebShop-style shopping environment (generated catalog, FTS5 BM25 search, exact reward,
text / text_rich / html pages, a website). See docs/envs/shop.md."""
