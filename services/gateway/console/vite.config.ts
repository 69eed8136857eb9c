import { defineConfig } from "vite";

// The gateway serves dist/ at / (console.go); `npm run dev` proxies the API to `make run`'s gateway.
export default defineConfig({
  esbuild: { jsx: "automatic", jsxImportSource: "preact" },
  build: { outDir: "dist", emptyOutDir: true, assetsDir: "assets", sourcemap: false },
  server: { proxy: { "/api": "http://localhost:8080" } },
});
