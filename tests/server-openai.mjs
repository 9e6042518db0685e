// The official openai client (npm "openai", installed into tests/node by
// setup.sh) against txlgen-server started here on 127.0.0.1: completions
// with and without streaming, n, echo with logprobs, and the server's
// errors surfaced as the client's exceptions.  Its answers are checked
// against the server's own over plain HTTP and against txlgen.
//
// Run: TXLGEN=build/cmd/txlgen TXLGEN_SERVER=build/server/txlgen-server \
//      node tests/server-openai.mjs
import { spawn, execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import assert from "node:assert/strict";
import test, { after, before } from "node:test";

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const require = createRequire(path.join(root, "tests", "node", "x.js"));
let OpenAI;
try {
	OpenAI = require("openai");
} catch {
	console.log("SKIP: the openai package is not in tests/node (setup.sh installs it)");
	process.exit(77);
}
const txlgen = process.env.TXLGEN ?? path.join(root, "build/cmd/txlgen");
const server = process.env.TXLGEN_SERVER ??
	path.join(root, "build/server/txlgen-server");
const model = path.join(root, "models/sotu.bin");
const KEY = "test-key-1234";
let proc, client, base;

before(async () => {
	const keyFile = path.join(process.env.TMPDIR ?? "/tmp",
		`txlgen-openai-key-${process.pid}`);
	(await import("node:fs")).writeFileSync(keyFile, KEY + "\n");
	proc = spawn(server, ["-m", model, "--port", "0", "--parallel", "4",
		"--api-key-file", keyFile], { stdio: ["ignore", "ignore", "pipe"] });
	const port = await new Promise((resolve, reject) => {
		let err = "";
		proc.stderr.on("data", (d) => {
			err += d;
			const m = err.match(/http:\/\/127\.0\.0\.1:(\d+)\//);
			if (m) resolve(Number(m[1]));
		});
		proc.on("exit", (c) => reject(new Error(`server exited ${c}: ${err}`)));
	});
	base = `http://127.0.0.1:${port}`;
	for (let i = 0; i < 600; i++) {
		const r = await fetch(`${base}/health`).catch(() => null);
		if (r && r.status === 200) break;
		await new Promise((s) => setTimeout(s, 50));
	}
	client = new OpenAI({ apiKey: KEY, baseURL: `${base}/v1`, maxRetries: 0 });
});

after(async () => {
	const done = new Promise((s) => proc.on("exit", s));
	proc.kill("SIGTERM");
	assert.equal(await done, 0);
});

const prompt = "Fellow citizens of the Senate and House of Representatives,";

test("a greedy completion is txlgen's text", async () => {
	const r = await client.completions.create({
		model: "sotu", prompt, max_tokens: 20, temperature: 0,
	});
	const want = execFileSync(txlgen, ["-m", model, "-p", prompt, "-n", "20",
		"--temp", "0"], { encoding: "utf8" });
	assert.equal(r.choices[0].text, want.replace(/\n$/, ""));
	assert.equal(r.choices[0].finish_reason, "length");
	assert.equal(r.usage.completion_tokens, 20);
});

test("a stream gives the same text in pieces", async () => {
	const body = { model: "sotu", prompt, max_tokens: 20, temperature: 0 };
	const whole = (await client.completions.create(body)).choices[0].text;
	const stream = await client.completions.create({ ...body, stream: true });
	let text = "", events = 0, finish = null;
	for await (const ev of stream) {
		text += ev.choices[0].text;
		finish = ev.choices[0].finish_reason ?? finish;
		events++;
	}
	assert.equal(text, whole);
	assert.equal(finish, "length");
	assert.ok(events >= 1);
});

test("n choices, each its own sample", async () => {
	const r = await client.completions.create({
		model: "sotu", prompt, max_tokens: 10, n: 3, seed: 11,
	});
	assert.equal(r.choices.length, 3);
	assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
	const alone = await client.completions.create({
		model: "sotu", prompt, max_tokens: 10, seed: 11,
	});
	assert.equal(r.choices[0].text, alone.choices[0].text);
});

test("echo with logprobs scores the prompt", async () => {
	const text = "The Congress shall have power to lay and collect taxes.";
	const r = await client.completions.create({
		model: "sotu", prompt: text, max_tokens: 0, echo: true, logprobs: 2,
	});
	const lp = r.choices[0].logprobs;
	assert.equal(r.choices[0].text, text);
	assert.equal(lp.token_logprobs[0], null);
	assert.equal(lp.tokens.join(""), text);
	const raw = await fetch(`${base}/v1/completions`, {
		method: "POST",
		headers: { Authorization: `Bearer ${KEY}` },
		body: JSON.stringify({ prompt: text, max_tokens: 0, echo: true,
			logprobs: 2 }),
	}).then((x) => x.json());
	assert.deepEqual(lp.token_logprobs, raw.choices[0].logprobs.token_logprobs);
	for (const v of lp.token_logprobs.slice(1)) assert.ok(v < 0);
});

test("errors reach the client as its exceptions", async () => {
	await assert.rejects(client.completions.create({
		model: "sotu", prompt, max_tokens: -1,
	}), (e) => e instanceof OpenAI.BadRequestError && /max_tokens/.test(e.message));
	await assert.rejects(client.chat.completions.create({
		model: "sotu", messages: [{ role: "user", content: "hi" }],
	}), (e) => e instanceof OpenAI.BadRequestError &&
		/\/v1\/completions/.test(e.message));
	const wrong = new OpenAI({ apiKey: "nope", baseURL: `${base}/v1`,
		maxRetries: 0 });
	await assert.rejects(wrong.completions.create({ model: "sotu", prompt }),
		(e) => e instanceof OpenAI.AuthenticationError);
	const models = await client.models.list();
	assert.equal(models.data[0].id, "sotu");
});
