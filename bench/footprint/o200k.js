// Counts the o200k tokens a model is shown of each tools/list dump in a
// directory (agent's TestToolListingSize writes them): per tool, its name,
// description and input schema's JSON, as an LLM API takes a tool
// definition. Each file is a JSON array of tools/list result messages.
// Prints {"file": {"tokens": N, "bytes": N, "tools": {"name": N}}}.
//
// Needs gpt-tokenizer (make tools installs it) on NODE_PATH.
'use strict';
const { encode } = require('gpt-tokenizer/encoding/o200k_base');
const fs = require('fs');
const path = require('path');

const dir = process.argv[2];
const out = {};
for (const f of fs.readdirSync(dir).sort()) {
  const pages = JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8'));
  const c = { tokens: 0, bytes: 0, tools: {} };
  for (const page of pages) {
    for (const tool of page.result.tools) {
      const s = tool.name + (tool.description || '') + JSON.stringify(tool.inputSchema);
      const n = encode(s).length;
      c.tools[tool.name] = n;
      c.tokens += n;
      c.bytes += Buffer.byteLength(s);
    }
  }
  out[f] = c;
}
process.stdout.write(JSON.stringify(out));
