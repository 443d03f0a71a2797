// Issues and a pull request in vole's web UI, in headless Chromium
// (Debian's, driven by playwright-core), JavaScript off: alice signs in,
// files an issue (a title that is markup), comments, labels and closes
// it; bob (who only reads the repo) comments and finds no close button,
// and his forged close is refused; alice opens a pull request from the
// pushed branch `feature`, looks at its diff and merges it with a merge
// commit. Screenshots go to OUT_DIR. Prints `ok`; exits non-zero with the
// step that failed.
//
// usage: node threads.mjs BASE_URL OUT_DIR REPO PASSWORD
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const [base, outDir, repo, password] = process.argv.slice(2);
mkdirSync(outDir, { recursive: true });

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox"],
});
let step = "start";
const expect = (cond, what) => {
  if (!cond) throw new Error(what);
};

async function signedIn(user) {
  const context = await browser.newContext({ javaScriptEnabled: false, viewport: { width: 1100, height: 800 } });
  const page = await context.newPage();
  await page.goto(`${base}/-/login?next=/${repo}`);
  await page.fill("#user", user);
  await page.fill("#password", password);
  await page.click('form.sign-in button[type="submit"]');
  await page.waitForURL(`**/${repo}`);
  return { context, page };
}

try {
  step = "alice signs in";
  const alice = await signedIn("alice");
  const page = alice.page;
  const shot = (p, name) => p.screenshot({ path: join(outDir, `${name}.png`), fullPage: true });

  step = "alice files an issue";
  await page.click('nav.tabs a[href$="/-/issues"]');
  await page.click('a.button[href$="/-/issues/new"]');
  await page.fill("#title", "<script>alert(1)</script> The build fails");
  await page.fill("#body", "It fails on **main**.\n\n<img src=x onerror=alert(2)> [x](javascript:alert(3))");
  await page.fill("#labels", "bug");
  await page.click('form.stacked-form button[type="submit"]');
  await page.waitForURL(/\/-\/issues\/\d+$/);
  const issueUrl = page.url();
  expect((await page.locator("h2.thread-title").textContent()).includes("<script>alert(1)</script>"), "the title is shown as text");
  expect((await page.locator(".thread-body strong").textContent()) === "main", "the body is Markdown");
  expect((await page.locator(".thread-body img[onerror]").count()) === 0, "onerror survived");
  expect((await page.locator('.thread-body a[href^="javascript"]').count()) === 0, "a javascript: link survived");

  step = "alice comments, referring to the issue";
  await page.fill("#comment", "Seen again, see #1.");
  await page.click('button[value="comment"]');
  await page.waitForSelector("li.comment");
  expect((await page.locator('li.comment a[href$="/-/issues/1"]').count()) === 1, "#1 is a link");

  step = "bob comments, and has no close button";
  const bob = await signedIn("bob");
  await bob.page.goto(issueUrl);
  await bob.page.fill("#comment", "Me too.");
  await bob.page.click('button[value="comment"]');
  await bob.page.waitForSelector("li.comment >> nth=1");
  expect((await bob.page.locator('button[value="close"]').count()) === 0, "bob sees a close button");
  expect((await bob.page.locator('button[value="labels"]').count()) === 0, "bob sees the labels form");
  const csrf = await bob.page.locator('input[name="csrf"]').first().inputValue();
  const forged = await bob.page.request.post(issueUrl, {
    form: { csrf, action: "close", body: "" },
    headers: { Origin: base },
  });
  expect(forged.status() === 403, `bob's forged close: ${forged.status()}`);

  step = "alice labels and closes it";
  await page.goto(issueUrl);
  await page.fill("#labels", "bug, ci");
  await page.click('button[value="labels"]');
  await page.waitForSelector('a.label:has-text("ci")');
  await page.fill("#comment", "Fixed by the next pull request.");
  await page.click('button[value="close"]');
  await page.waitForSelector(".state.closed");
  expect((await page.locator("li.comment").count()) === 3, "three comments, in order");
  await shot(page, "issue");
  await page.goto(`${base}/${repo}/-/issues?state=closed`);
  expect((await page.locator("ul.threads li").count()) === 1, "the closed tab lists it");
  await shot(page, "issue-list");

  step = "alice opens a pull request from feature";
  await page.goto(`${base}/${repo}/-/pulls/new`);
  await page.selectOption("#source", "feature");
  await page.selectOption("#target", "main");
  await page.fill("#title", "Add the greeting");
  await page.fill("#body", "Fixes #1.");
  await page.click('form.stacked-form button[type="submit"]');
  await page.waitForURL(/\/-\/pulls\/\d+$/);
  const pullUrl = page.url();
  expect((await page.locator("ul.log li").count()) === 2, "its two commits");
  await page.click('nav.state-tabs a[href$="/files"]');
  await page.waitForSelector("table.diff");
  expect((await page.locator('section[aria-label="greeting.txt"] table.diff').textContent()).includes("hello from the branch"), "the diff shows the added line");
  await shot(page, "pull-files");

  step = "alice merges it";
  await page.goto(pullUrl);
  expect((await page.locator("section.merge-box").textContent()).includes("can be merged"), "mergeable");
  await shot(page, "pull-merge-box");
  await page.selectOption("#method", "merge");
  await page.click('section.merge-box button[type="submit"]');
  await page.waitForSelector(".state.merged");
  await shot(page, "pull-merged");
  console.log("ok");
} catch (e) {
  console.error(`step "${step}": ${e.stack || e}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
