// A person signing in to vole's web UI in headless Chromium (Debian's,
// driven by playwright-core): a private repo is not found; the sign-in
// page, a wrong password, the right one (back to the repo, now shown, the
// header naming the user), a token made on the tokens page (shown once),
// sign-out (the repo not found again), all with JavaScript off: every
// step is a plain form or link. A
// screenshot of each step goes to OUT_DIR. Prints `token <secret>` (the
// page's token, for the caller to clone with) and then `ok`; exits non-zero
// with the step that failed.
//
// usage: node sign_in.mjs BASE_URL OUT_DIR USER PASSWORD REPO
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const [base, outDir, user, password, repo] = process.argv.slice(2);
mkdirSync(outDir, { recursive: true });

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox"],
});
let step = "start";
try {
  const context = await browser.newContext({ javaScriptEnabled: false });
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  const shot = (name) => page.screenshot({ path: join(outDir, `${name}.png`), fullPage: true });
  const expect = (cond, what) => {
    if (!cond) throw new Error(what);
  };

  step = "the private repo, anonymously";
  let response = await page.goto(`${base}/${repo}`);
  expect(response.status() === 404, `anonymous: ${response.status()}`);

  step = "the sign-in page";
  await page.goto(`${base}/-/login?next=/${repo}`);
  expect((await page.locator("h1").textContent()) === "Sign in", "the sign-in page has its h1");
  await shot("sign-in");

  step = "a wrong password";
  await page.fill("#user", user);
  await page.fill("#password", "not the password");
  await page.click('form.sign-in button[type="submit"]');
  await page.waitForSelector('p[role="alert"]');
  expect((await page.locator('p[role="alert"]').textContent()).includes("Wrong"), "the form says so");
  await shot("sign-in-wrong");

  step = "the right password";
  await page.fill("#user", user);
  await page.fill("#password", password);
  await page.click('form.sign-in button[type="submit"]');
  await page.waitForURL(`**/${repo}`);
  expect((await page.locator("nav.viewer").textContent()).includes(`Signed in as ${user}`), "the header names the user");
  const cookies = await context.cookies();
  const session = cookies.find((c) => c.name === "vole_session");
  expect(session && session.httpOnly && session.sameSite === "Lax", `session cookie: ${JSON.stringify(session)}`);
  await shot("signed-in");

  step = "make a token";
  await page.click('nav.viewer a[href="/-/user/tokens"]');
  await page.waitForURL("**/-/user/tokens");
  await page.fill("#name", "laptop");
  await page.selectOption("#scope", "read");
  await page.click('form.token-form button[type="submit"]');
  await page.waitForSelector("input.token-text");
  const token = await page.locator("input.token-text").inputValue();
  expect(token.startsWith("vole_"), `the new token is shown: ${token}`);
  expect((await page.locator("table.tokens").textContent()).includes("laptop"), "the token is listed");
  await shot("tokens");
  await page.goto(`${base}/-/user/tokens`);
  expect((await page.locator("input.token-text").count()) === 0, "the token is shown again after a reload");
  console.log(`token ${token}`);

  step = "sign out";
  await page.click('nav.viewer button[type="submit"]');
  await page.waitForURL(`${base}/`);
  expect((await page.locator("nav.viewer").textContent()).includes("Sign in"), "signed out");
  response = await page.goto(`${base}/${repo}`);
  expect(response.status() === 404, `after sign-out: ${response.status()}`);
  await shot("signed-out");

  step = "no script ran";
  expect(errors.length === 0, errors.join("; "));
  console.log("ok");
} catch (e) {
  console.error(`sign-in journey failed at "${step}": ${e.message}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
