// Issues and pull requests in vole's web UI, in headless Chromium
// (Debian's, driven by playwright-core), JavaScript off: alice signs in,
// files an issue (a title that is markup), comments, labels and closes
// it; bob (who only reads the repo) comments and finds no close button,
// and his forged close is refused. Then the pull requests, each from a
// branch the test pushed from the same base: `quick` merged fast-forward
// only; `feature` (its diff looked at) with a merge commit; `late`, shown
// while a fast-forward was possible, refused it once main has moved on; `clash` shown as conflicting with its
// path listed, no merge button, and its forged merge refused; `squashme`
// squashed while `late` is shown in another tab, whose merge is then
// refused because main moved after it was shown. Screenshots go to
// OUT_DIR. Prints `ok`; exits non-zero with the step that failed.
//
// usage: node threads.mjs BASE_URL OUT_DIR REPO PASSWORD CLASH_HEAD
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const [base, outDir, repo, password, clashHead] = process.argv.slice(2);
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

  // Opens a pull request from `source` into main; returns its URL.
  const openPull = async (source, title) => {
    await page.goto(`${base}/${repo}/-/pulls/new`);
    await page.selectOption("#source", source);
    await page.selectOption("#target", "main");
    await page.fill("#title", title);
    await page.fill("#body", "Fixes #1.");
    await page.click('form.stacked-form button[type="submit"]');
    await page.waitForURL(/\/-\/pulls\/\d+$/);
    return page.url();
  };
  // Merges the pull request shown on `p` by `method`.
  const merge = async (p, method) => {
    await p.selectOption("#method", method);
    await p.click('section.merge-box button[type="submit"]');
    await p.waitForLoadState();
  };

  step = "alice opens a pull request from feature and looks at its diff";
  const featureUrl = await openPull("feature", "Add the greeting");
  expect((await page.locator("ul.log li").count()) === 2, "its two commits");
  await page.click('nav.state-tabs a[href$="/files"]');
  await page.waitForSelector("table.diff");
  expect((await page.locator('section[aria-label="greeting.txt"] table.diff').textContent()).includes("hello from the branch"), "the diff shows the added line");
  await shot(page, "pull-files");

  step = "late is shown in another tab while a fast-forward is possible";
  const lateUrl = await openPull("late", "Late change");
  const other = await alice.context.newPage();
  await other.goto(lateUrl);
  expect((await other.locator("section.merge-box").textContent()).includes("a fast-forward is possible"), "late could be fast-forwarded");

  step = "alice merges quick fast-forward only";
  await openPull("quick", "Quick fix");
  expect((await page.locator("section.merge-box").textContent()).includes("a fast-forward is possible"), "quick can be fast-forwarded");
  await merge(page, "fast-forward-only");
  await page.waitForSelector(".state.merged");

  step = "alice merges feature with a merge commit";
  await page.goto(featureUrl);
  expect((await page.locator("section.merge-box").textContent()).includes("can be merged"), "mergeable");
  await shot(page, "pull-merge-box");
  await merge(page, "merge");
  await page.waitForSelector(".state.merged");
  await shot(page, "pull-merged");

  step = "late's fast-forward, from the tab shown before, is refused: main has moved on";
  await merge(other, "fast-forward-only");
  const ffRefusal = await other.locator('[role="alert"]').textContent();
  expect(ffRefusal.includes("moved since the page was shown") || ffRefusal.includes("a fast-forward is not possible"), `no refusal shown: ${ffRefusal}`);
  expect((await other.locator(".state.open").count()) === 1, "late is not open any more");
  expect((await other.locator('#method option[value="fast-forward-only"]').count()) === 0, "a fast-forward is still offered");
  await shot(other, "pull-ff-refused");

  step = "clash conflicts: its path is listed and its forged merge refused";
  const clashUrl = await openPull("clash", "Clashing change");
  const box = await page.locator("section.merge-box").textContent();
  expect(box.includes("conflicts") && (await page.locator("ul.conflicts code").textContent()) === "quick.txt", `the conflict is not listed: ${box}`);
  expect((await page.locator('section.merge-box button[type="submit"]').count()) === 0, "a conflicting pull request has a merge button");
  await shot(page, "pull-conflict");
  await page.goto(lateUrl);
  const target = await page.locator('section.merge-box input[name="target"]').inputValue();
  const csrf2 = await page.locator('input[name="csrf"]').first().inputValue();
  const forgedMerge = await page.request.post(`${clashUrl}/merge`, {
    form: { csrf: csrf2, head: clashHead, target, target_branch: "main", method: "merge" },
    headers: { Origin: base },
  });
  expect(forgedMerge.status() === 409, `the forged merge of clash: ${forgedMerge.status()}`);
  expect((await forgedMerge.text()).includes("quick.txt"), "the refusal does not name the path");

  step = "squashme is squashed while late is shown in another tab";
  await other.goto(lateUrl);
  await other.waitForSelector('section.merge-box button[type="submit"]');
  await openPull("squashme", "Squash me");
  await merge(page, "squash");
  await page.waitForSelector(".state.merged");
  await shot(page, "pull-squashed");

  step = "late's merge from the tab shown before main moved is refused";
  await merge(other, "merge");
  expect((await other.locator('[role="alert"]').textContent()).includes("moved since the page was shown"), "the moved target was not refused");
  expect((await other.locator(".state.open").count()) === 1, "late is not open any more");
  await shot(other, "pull-moved-refused");
  console.log("ok");
} catch (e) {
  console.error(`step "${step}": ${e.stack || e}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
