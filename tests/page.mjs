// txlgen-server's page at / in a real browser (Debian's chromium, driven
// by puppeteer-core from tests/node): tests/test_page.py starts the
// server and says what to do in a JSON plan; this drives the page as a
// person would (types, clicks, hovers, drops a file, presses keys) and
// writes what the page showed as one JSON object on stdout, which the
// Python side checks against txlgen.  It asserts nothing itself.
//
//   node tests/page.mjs PLAN.json      (PLAN: see tests/test_page.py)
//   node tests/page.mjs --shots URL DIR   the README's screenshots
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const require = createRequire(path.join(root, "tests", "node", "x.js"));
const puppeteer = require("puppeteer-core");
const CHROMIUM = process.env.TXLGEN_CHROMIUM ?? "/usr/bin/chromium";
const T = 30000;                 // ms for anything the page waits on

async function launch() {
	return puppeteer.launch({
		executablePath: CHROMIUM, headless: true,
		args: ["--no-sandbox", "--disable-gpu", "--no-first-run",
			"--disable-dev-shm-usage",
			"--disable-extensions", "--disable-background-networking"],
	});
}

// A page that records its console errors, uncaught exceptions and every
// request it makes.
async function open(browser, url, width = 1000, height = 900) {
	const page = await browser.newPage();
	await page.setViewport({ width, height });
	const log = { errors: [], requests: [] };
	page.on("console", (m) => {
		if (m.type() === "error")
			log.errors.push(m.text());
	});
	page.on("pageerror", (e) => log.errors.push("uncaught: " + e.message));
	page.on("request", (r) => log.requests.push(r.url()));
	await page.goto(url, { waitUntil: "load" });
	return { page, log };
}

const ready = (page) => page.waitForFunction(() =>
	document.getElementById("status").textContent === "ready", { timeout: T });

async function setField(page, sel, value) {
	await page.click(sel, { clickCount: 3 });
	await page.keyboard.press("Backspace");
	await page.type(sel, String(value));
}

// Generate from the form as it is, and wait for the end.
async function generate(page) {
	await page.click("#generate");
	await page.waitForFunction(() =>
		!document.getElementById("generate").disabled &&
		!/generating/.test(document.getElementById("gen-status").textContent),
	{ timeout: T });
	return page.evaluate(() => ({
		text: Array.from(document.querySelectorAll("#output span.tok"),
			(s) => s.textContent).join(""),
		n: document.querySelectorAll("#output span.tok").length,
		status: document.getElementById("gen-status").textContent,
		read: document.getElementById("gen-read")?.textContent ?? null,
		total: document.getElementById("gen-total")?.textContent ?? null,
	}));
}

const tooltip = (page) => page.evaluate(() => {
	const t = document.querySelector("[role=tooltip]");
	return { shown: !t.hidden, text: t.textContent,
		rows: t.querySelectorAll("tr").length };
});

async function plain(plan) {
	const browser = await launch();
	const out = {};
	try {
		const { page, log } = await open(browser, plan.base);
		await ready(page);
		// continue a text at temperature 0
		await page.type("#prompt", plan.prompt);
		await setField(page, "#max-tokens", plan.n);
		await setField(page, "#temperature", 0);
		out.gen = await generate(page);
		const toks = await page.$$("#output span.tok");
		await toks[1].hover();
		out.hover = await tooltip(page);
		await page.mouse.move(0, 0);
		out.after_hover = await tooltip(page);
		// by keyboard: a token takes the focus and shows its popover
		await toks[2].focus();
		out.focus = await tooltip(page);
		await page.keyboard.press("Escape");
		out.after_escape = await tooltip(page);

		// a session made through the API, continued here
		await page.click("#sessions-refresh");
		await page.waitForSelector(`#sessions tr[data-session="${plan.session}"]`,
			{ timeout: T });
		out.sessions = await page.$$eval("#sessions tbody tr", (rows) =>
			rows.map((r) => ({ id: r.dataset.session,
				cells: Array.from(r.cells, (c) => c.textContent) })));
		await page.click(`#sessions tr[data-session="${plan.session}"] ` +
			"button.continue");
		out.session_field = await page.$eval("#session", (e) => e.value);
		await page.type("#prompt", plan.more);
		await setField(page, "#max-tokens", plan.n_more);
		out.cont = await generate(page);

		// score a text dropped as a file
		await page.click("#tab-score");
		await page.evaluate((text) => {
			const dt = new DataTransfer();
			dt.items.add(new File([text], "text.txt", { type: "text/plain" }));
			const box = document.getElementById("score-input");
			box.dispatchEvent(new DragEvent("dragover", { dataTransfer: dt,
				bubbles: true, cancelable: true }));
			box.dispatchEvent(new DragEvent("drop", { dataTransfer: dt,
				bubbles: true, cancelable: true }));
		}, plan.score_text);
		await page.waitForFunction(() =>
			document.querySelectorAll("#score-output span.tok").length > 0 &&
			!document.getElementById("score-run").disabled, { timeout: T });
		const spans = () => page.$$eval("#score-output span.tok", (s) =>
			s.map((x) => ({ text: x.textContent, logprob: x.dataset.logprob,
				rank: x.dataset.rank, cls: x.className,
				bg: x.style.background })));
		out.score = await spans();
		out.score_input = await page.$eval("#score-input", (e) => e.value);
		out.summary = await page.$eval("#score-summary", (e) => e.textContent);
		out.plot_points = await page.$$eval("#score-plot polyline", (p) =>
			p.map((x) => x.getAttribute("points").split(" ").length));
		const stoks = await page.$$("#score-output span.tok");
		await stoks[3].hover();
		out.score_hover = await tooltip(page);
		await page.select("#score-color", "bits");
		out.score_bits = await spans();
		out.legend_bits = await page.$eval("#legend", (e) => e.textContent);
		await page.select("#score-color", "rank");
		out.legend_rank = await page.$eval("#legend", (e) => e.textContent);

		// the export, as a download
		const cdp = await page.createCDPSession();
		await cdp.send("Browser.setDownloadBehavior", { behavior: "allow",
			downloadPath: plan.download_dir });
		await page.click("#score-export");
		const file = path.join(plan.download_dir, "score.json");
		for (let i = 0; i < 100 && !fs.existsSync(file); i++)
			await new Promise((s) => setTimeout(s, 100));
		out.export = fs.existsSync(file) ? fs.readFileSync(file, "utf8") : null;

		// a narrow window: nothing wider than it
		await page.setViewport({ width: 360, height: 800 });
		await page.click("#tab-generate");
		out.narrow = await page.evaluate(() => ({
			scroll: document.documentElement.scrollWidth, width: innerWidth }));
		out.errors = log.errors;
		out.requests = log.requests;
	} finally {
		await browser.close();
	}
	return out;
}

async function withKey(plan) {
	const browser = await launch();
	const out = {};
	try {
		const { page, log } = await open(browser, plan.base);
		await page.waitForSelector("#key-dialog[open]", { timeout: T });
		out.asked = true;
		await page.type("#api-key", plan.key);
		await page.keyboard.press("Enter");
		await ready(page);
		await page.type("#prompt", plan.prompt);
		await setField(page, "#max-tokens", plan.n);
		await setField(page, "#temperature", 0);
		out.gen = await generate(page);
		// kept for the tab: a reload does not ask again
		await page.reload({ waitUntil: "load" });
		await ready(page);
		out.asked_again = await page.$eval("#key-dialog", (d) => d.open);
		out.errors = log.errors;
		out.requests = log.requests;
	} finally {
		await browser.close();
	}
	return out;
}

// The README's two screenshots: the generate view with a token's
// popover, the score view.
async function shots(base, dir) {
	const browser = await launch();
	try {
		const { page } = await open(browser, base, 800, 760);
		await ready(page);
		await page.type("#prompt", "Fellow citizens of the Senate and House " +
			"of Representatives,");
		await setField(page, "#max-tokens", 40);
		await setField(page, "#seed", 1);
		await generate(page);
		await (await page.$$("#output span.tok"))[6].hover();
		await page.screenshot({ path: path.join(dir, "page-generate.png") });
		await page.mouse.move(0, 0);
		await page.setViewport({ width: 760, height: 700 });
		await page.click("#tab-score");
		await page.$eval("#score-input", (e, t) => { e.value = t; },
			"We hold these truths to be self-evident, that all men are " +
			"created equal, that they are endowed by their Creator with " +
			"certain unalienable Rights, that among these are Life, Liberty " +
			"and the pursuit of Happiness. Colorless green ideas sleep " +
			"furiously.");
		await page.click("#score-run");
		await page.waitForSelector("#score-output span.tok", { timeout: T });
		await (await page.$$("#score-output span.tok"))[48].hover();
		await page.screenshot({ path: path.join(dir, "page-score.png") });
	} finally {
		await browser.close();
	}
}

// txlgen --score --html's report, opened from its file: what it shows.
async function report(plan) {
	const browser = await launch();
	try {
		const { page, log } = await open(browser,
			"file://" + plan.report);
		const out = await page.evaluate(() => ({
			spans: Array.from(document.querySelectorAll("span.tok"), (x) => ({
				text: x.textContent, logprob: x.dataset.logprob,
				rank: x.dataset.rank })),
			points: Array.from(document.querySelectorAll("svg polyline"),
				(p) => p.getAttribute("points").trim().split(/\s+/).length),
			plot_height: document.querySelector("svg")?.getBoundingClientRect()
				.height ?? 0,
		}));
		out.errors = log.errors;
		out.requests = log.requests;
		return out;
	} finally {
		await browser.close();
	}
}

if (process.argv[2] === "--shots") {
	await shots(process.argv[3], process.argv[4]);
} else {
	const plan = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
	const out = plan.report ? await report(plan)
		: plan.key ? await withKey(plan) : await plain(plan);
	process.stdout.write(JSON.stringify(out) + "\n");
}
