// vole driven by gitea-js, a client generated from Gitea's OpenAPI
// document (pinned in package.json): the calls a team's tools make, as
// far as vole answers them in Gitea's shape so far (the issue list, an
// issue's and a comment's objects are still vole's: issue 32). The
// token's user creates a repo; the test (in Rust) pushes two branches
// between the two phases. Each step checks what Gitea's API would answer.
// Prints `ok`; exits non-zero naming the step that failed.
//
// usage: node gitea_client.mjs BASE_URL TOKEN USER PHASE
//   PHASE create: make USER/tools and print its clone URL;
//   PHASE work:   everything else, on USER/tools with main and feature.
import { giteaApi } from "gitea-js";

const [base, token, user, phase] = process.argv.slice(2);
const api = giteaApi(base, { token, customFetch: fetch });
let step = "start";
const expect = (cond, what) => {
  if (!cond) throw new Error(what);
};

// gitea-js throws the response of a non-2xx answer: its status.
async function status(call) {
  try {
    const r = await call();
    return r.status;
  } catch (r) {
    if (r && typeof r.status === "number") return r.status;
    throw r;
  }
}

try {
  if (phase === "create") {
    step = "version";
    const { data: version } = await api.version.getVersion();
    expect(/^1\.22\.0\+vole-/.test(version.version), `version ${version.version}`);
    step = "current user";
    const { data: me } = await api.user.userGetCurrent();
    expect(me.login === user && Number.isInteger(me.id) && me.id > 0, JSON.stringify(me));
    step = "create repo";
    const { data: repo, status: made } = await api.user.createCurrentUserRepo({
      name: "tools",
      description: "made by gitea-js",
      private: false,
    });
    expect(made === 201, `create answered ${made}`);
    expect(repo.full_name === `${user}/tools` && repo.empty === true, JSON.stringify(repo));
    expect(repo.owner.login === user && repo.permissions.admin === true, "owner and permissions");
    console.log(repo.clone_url);
    console.log("ok");
    process.exit(0);
  }

  const owner = user;
  const name = "tools";
  step = "list branches";
  const { data: branches } = await api.repos.repoListBranches(owner, name);
  const names = branches.map((b) => b.name).sort();
  expect(JSON.stringify(names) === '["feature","main"]', `branches ${names}`);
  expect(branches.every((b) => /^[0-9a-f]{40}$/.test(b.commit.id)), "branch commits");

  step = "create an issue";
  const { data: issue, status: created } = await api.repos.issueCreateIssue(owner, name, {
    title: "The build is slow",
    body: "It takes **ten** minutes.",
  });
  expect(created === 201 && issue.number >= 1, JSON.stringify(issue));

  step = "label the issue";
  const { data: label, status: labelMade } = await api.repos.issueCreateLabel(owner, name, {
    name: "slow",
    color: "#E11D21",
    description: "takes too long",
  });
  expect(labelMade === 201 && Number.isInteger(label.id) && label.color === "e11d21", JSON.stringify(label));
  const { data: labelled } = await api.repos.issueAddLabel(owner, name, issue.number, {
    labels: [label.id],
  });
  expect(labelled.length === 1 && labelled[0].id === label.id && labelled[0].name === "slow", JSON.stringify(labelled));
  const { data: listed } = await api.repos.issueListLabels(owner, name);
  expect(listed.length === 1 && listed[0].description === "takes too long", JSON.stringify(listed));
  expect(
    (await status(() => api.repos.issueCreateLabel(owner, name, { name: "SLOW", color: "#000000" }))) === 409,
    "a second label of the name is a 409"
  );

  step = "open a pull request";
  const { data: pull, status: opened } = await api.repos.repoCreatePullRequest(owner, name, {
    head: "feature",
    base: "main",
    title: "Speed up the build",
  });
  expect(opened === 201 && pull.state === "open" && pull.head.ref === "feature", JSON.stringify(pull));
  expect(pull.base.ref === "main" && /^[0-9a-f]{40}$/.test(pull.head.sha), "the sides");
  expect(
    (await status(() => api.repos.repoCreatePullRequest(owner, name, { head: "feature", base: "main", title: "again" }))) === 409,
    "a second open pull request of the same branches is a 409"
  );
  const { data: shown } = await api.repos.repoGetPullRequest(owner, name, pull.number);
  expect(shown.mergeable === true && shown.merged === false, JSON.stringify(shown));

  step = "merge the pull request";
  const merged = await api.repos.repoMergePullRequest(owner, name, pull.number, { Do: "merge" });
  expect(merged.status === 200, `merge answered ${merged.status}`);
  const { data: after } = await api.repos.repoGetPullRequest(owner, name, pull.number);
  expect(after.merged === true && /^[0-9a-f]{40}$/.test(after.merge_commit_sha), JSON.stringify(after));
  expect(after.state === "closed" && after.merged_by.login === user, "merged by the user, closed");

  step = "a missing repo";
  expect((await status(() => api.repos.repoGet(owner, "no-such-repo"))) === 404, "a missing repo is a 404");
  console.log("ok");
} catch (e) {
  const detail = e && e.error ? JSON.stringify(e.error) : e && e.stack ? e.stack : String(e);
  console.error(`step "${step}" failed: ${e && e.status ? e.status + " " : ""}${detail}`);
  process.exit(1);
}
