// check_openai_client.js — the official OpenAI client from npm (`openai`,
// pinned by package-lock.json) against a running `kldeval serve`: lists the
// models, asks a completion with echoed prompt log-probabilities, a greedy
// and a seeded sampled generation (twice), a chat completion, and a call
// with a wrong API key. Prints what the client parsed as one JSON object on
// stdout; tests/test_serve_openai.py compares it with the server's raw
// replies. usage: node check_openai_client.js BASE_URL API_KEY
'use strict';
const OpenAI = require('openai');

async function main() {
  const [base, key] = process.argv.slice(2);
  const client = new OpenAI({ baseURL: base + '/v1', apiKey: key, maxRetries: 0 });
  const out = {};
  const models = await client.models.list();
  out.models = models.data.map((m) => m.id);
  const model = out.models[0];
  // an lm-evaluation-harness style log-likelihood request, as text
  const echo = await client.completions.create({
    model, prompt: 'Once upon a time there was', max_tokens: 0, echo: true, logprobs: 3, temperature: 0,
  });
  out.echo = { text: echo.choices[0].text, logprobs: echo.choices[0].logprobs, usage: echo.usage };
  const greedy = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 12, temperature: 0 });
  out.greedy = { text: greedy.choices[0].text, finish_reason: greedy.choices[0].finish_reason };
  const sample = () => client.completions.create({
    model, prompt: 'The cat', max_tokens: 10, temperature: 0.9, top_p: 0.95, seed: 7,
  });
  out.sampled = [(await sample()).choices[0].text, (await sample()).choices[0].text];
  const chat = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'Tell me a story.' }], max_tokens: 10, temperature: 0,
  });
  out.chat = { role: chat.choices[0].message.role, content: chat.choices[0].message.content };
  const wrong = new OpenAI({ baseURL: base + '/v1', apiKey: 'not-the-key', maxRetries: 0 });
  try {
    await wrong.models.list();
    out.wrong_key = 'accepted';
  } catch (e) {
    out.wrong_key = { status: e.status, name: e.constructor.name };
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((e) => {
  process.stderr.write(`check_openai_client: ${e.stack || e}\n`);
  process.exit(1);
});
