// A person browsing vole's web UI in headless Chromium (Debian's, driven by
// playwright-core): from the home page to a repo, its README, down the
// tree (with each entry's last commit) to a file, its blame, a line anchor, back by the breadcrumbs, the log, a
// commit's diff, a branch switch and an archive download. A screenshot of
// every page goes to OUT_DIR. Exits non-zero with the step that failed.
//
// usage: node browse.mjs BASE_URL OUT_DIR
import { chromium } from "playwright-core";
import { mkdirSync, statSync } from "node:fs";
import { join } from "node:path";

const [base, outDir] = process.argv.slice(2);
mkdirSync(outDir, { recursive: true });

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox"],
});
let step = "start";
try {
  const context = await browser.newContext({ acceptDownloads: true });
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("dialog", (d) => {
    errors.push(`a dialog opened: ${d.message()}`);
    d.dismiss();
  });
  const shot = (name) => page.screenshot({ path: join(outDir, `${name}.png`), fullPage: true });
  const expect = (cond, what) => {
    if (!cond) throw new Error(what);
  };

  step = "home";
  await page.goto(base + "/");
  expect((await page.locator("h1").textContent()) === "Repositories", "home has its h1");
  await shot("home");

  step = "open the repo";
  await page.click('a[href="/alice/demo"]');
  await page.waitForURL("**/alice/demo");
  expect(await page.locator("section.readme h2").textContent() === "Demo", "README rendered");
  expect(await page.locator("h1").count() === 1, "one h1");
  await shot("repo");

  step = "walk the tree";
  await page.click('table.listing a[href$="/-/tree/main/docs"]');
  await page.waitForURL("**/-/tree/main/docs");
  expect(await page.locator("table.listing td.last-commit a").count() > 0, "the listing shows last commits");
  expect((await page.locator("table.listing td.size").first().textContent()).endsWith(" B"), "files have sizes");
  await shot("tree");
  await page.click('table.listing a[href$="/docs/manual.md"]');
  await page.waitForURL("**/-/blob/main/docs/manual.md");
  await shot("blob");

  step = "blame";
  await page.click('p.blob-meta a[href$="/-/blame/main/docs/manual.md"]');
  await page.waitForURL("**/-/blame/main/docs/manual.md");
  expect(await page.locator("td.blame-commit a").count() > 0, "blame names a commit");
  await shot("blame");
  await page.goBack();

  step = "follow a line anchor";
  await page.click('a[href="#L2"]');
  expect(page.url().endsWith("#L2"), "the anchor is in the URL");
  const targeted = await page.evaluate(() => document.querySelector(":target")?.id);
  expect(targeted === "L2", `line 2 is the target (got ${targeted})`);
  await shot("line-anchor");

  step = "back by the breadcrumbs";
  await page.click('nav.crumbs a[href$="/-/tree/main/docs"]');
  await page.waitForURL("**/-/tree/main/docs");
  await page.click('nav.crumbs a[href$="/-/tree/main"]');
  await page.waitForURL("**/-/tree/main");

  step = "the log and a commit";
  await page.click('nav.tabs a[href*="/-/commits/"]');
  await page.waitForURL("**/-/commits/main");
  await shot("log");
  await page.click("ol.log li:first-child a");
  await page.waitForURL("**/-/commit/*");
  expect(await page.locator("table.diff tr.add").count() > 0, "the diff shows added lines");
  expect(await page.locator("section.file-diff").count() >= 2, "the diff is split per file");
  await shot("commit");

  step = "switch branch";
  await page.goto(base + "/alice/demo");
  await page.click("details.refs summary");
  await page.click('details.refs a[href$="/-/tree/topic"]');
  await page.waitForURL("**/-/tree/topic");
  expect((await page.locator("details.refs summary").textContent()).includes("topic"), "on topic");
  await shot("branch");

  step = "download an archive";
  await page.click('nav.tabs a[href$="/-/branches"]');
  await page.waitForURL("**/-/branches");
  await shot("branches");
  const [download] = await Promise.all([
    page.waitForEvent("download"),
    page.click('a[href$="/-/archive/main.tar.gz"]'),
  ]);
  const saved = join(outDir, "main.tar.gz");
  await download.saveAs(saved);
  expect(statSync(saved).size > 100, "the archive has content");

  step = "narrow screen";
  await page.setViewportSize({ width: 360, height: 740 });
  await page.goto(base + "/alice/demo");
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  expect(overflow <= 0, `the repo page scrolls sideways at 360 px (${overflow} px)`);
  await shot("repo-360");

  step = "no script ran";
  expect(errors.length === 0, errors.join("; "));
  console.log("ok");
} catch (e) {
  console.error(`browser journey failed at "${step}": ${e.message}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
