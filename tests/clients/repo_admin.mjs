// A repo made and shared from vole's web UI in headless Chromium (Debian's,
// driven by playwright-core): the owner signs in, creates a private repo
// with the New repository form, adds a member with read access on its
// settings page; the member signs in, sees the repo (marked private on
// the home page) but no settings link, and a settings POST forged with
// the member's own session token is refused (403) and changes nothing;
// signed out, the repo is not found. A screenshot of each step goes to
// OUT_DIR. Exits non-zero with the step that failed.
//
// usage: node repo_admin.mjs BASE_URL OUT_DIR OWNER OWNER_PASSWORD MEMBER MEMBER_PASSWORD
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const [base, outDir, owner, ownerPassword, member, memberPassword] = process.argv.slice(2);
mkdirSync(outDir, { recursive: true });
const repo = `${owner}/team`;

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox"],
});
let step = "start";
try {
  const errors = [];
  const expect = (cond, what) => {
    if (!cond) throw new Error(what);
  };
  const signIn = async (user, password) => {
    const context = await browser.newContext();
    const page = await context.newPage();
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.goto(`${base}/-/login`);
    await page.fill("#user", user);
    await page.fill("#password", password);
    await page.click('form.sign-in button[type="submit"]');
    await page.waitForURL(`${base}/`);
    expect((await page.locator("nav.viewer").textContent()).includes(`Signed in as ${user}`), `${user} is signed in`);
    return page;
  };
  const shot = (page, name) => page.screenshot({ path: join(outDir, `${name}.png`), fullPage: true });

  step = "the owner signs in";
  const ownerPage = await signIn(owner, ownerPassword);

  step = "the New repository form";
  await ownerPage.click('nav.viewer a[href="/-/new"]');
  await ownerPage.waitForURL("**/-/new");
  await ownerPage.fill("#name", "team");
  await ownerPage.fill("#description", "The team's code");
  await ownerPage.check('input[name="private"]');
  await shot(ownerPage, "new-repo");
  await ownerPage.click('form.stacked-form button[type="submit"]');
  await ownerPage.waitForURL(`${base}/${repo}`);
  expect((await ownerPage.locator("p.muted").first().textContent()).includes("The team's code"), "the description is shown");

  step = "the settings page";
  await ownerPage.click('nav.tabs a[href$="/-/settings"]');
  await ownerPage.waitForURL(`**/${repo}/-/settings`);
  expect((await ownerPage.locator("#visibility").inputValue()) === "private", "the repo is private");

  step = "add a member with read access";
  await ownerPage.fill("#member", member);
  await ownerPage.selectOption("#role", "read");
  await ownerPage.click('form.add-member button[type="submit"]');
  await ownerPage.waitForURL(`**/${repo}/-/settings?saved=access`);
  expect((await ownerPage.locator("table.members").textContent()).includes(member), "the member is listed");
  await shot(ownerPage, "settings");

  step = "the member signs in";
  const memberPage = await signIn(member, memberPassword);
  const home = await memberPage.locator("ul.repos").textContent();
  expect(home.includes(repo) && home.includes("private"), `the member's home page lists the private repo: ${home}`);
  let response = await memberPage.goto(`${base}/${repo}`);
  expect(response.status() === 200, `the member reads the repo: ${response.status()}`);
  expect((await memberPage.locator('nav.tabs a[href$="/-/settings"]').count()) === 0, "a reader sees no settings link");
  await shot(memberPage, "member-view");

  step = "a forged settings POST from the member's session";
  const csrf = await memberPage.locator('nav.viewer input[name="csrf"]').inputValue();
  const forged = await memberPage.evaluate(async ([repo, csrf]) => {
    const body = new URLSearchParams({ csrf, acl_version: "0", action: "visibility", visibility: "public" });
    const r = await fetch(`/${repo}/-/settings/access`, { method: "POST", body, redirect: "manual" });
    return r.status;
  }, [repo, csrf]);
  expect(forged === 403, `the forged POST: ${forged}`);
  await ownerPage.goto(`${base}/${repo}/-/settings`);
  expect((await ownerPage.locator("#visibility").inputValue()) === "private", "the forged POST changed nothing");

  step = "the member signs out";
  await memberPage.click('nav.viewer button[type="submit"]');
  await memberPage.waitForURL(`${base}/`);
  response = await memberPage.goto(`${base}/${repo}`);
  expect(response.status() === 404, `signed out, the private repo: ${response.status()}`);
  await shot(memberPage, "signed-out");

  step = "no script ran";
  expect(errors.length === 0, errors.join("; "));
  console.log("ok");
} catch (e) {
  console.error(`repo admin journey failed at "${step}": ${e.message}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
