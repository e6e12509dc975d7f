"""Browser GUI envs: real Chromium through Playwright (MiniWoB++ tasks, shop pages)."""
