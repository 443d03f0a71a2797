// vole driven by gitea-js, a client generated from Gitea's OpenAPI
// document (pinned in package.json): the calls a team's tools make. The
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

  step = "history and files";
  const commits = await api.repos.repoGetAllCommits(owner, name, { sha: "feature", limit: 1 });
  expect(commits.data.length === 1 && commits.data[0].commit.message.trim().length > 0, JSON.stringify(commits.data));
  expect(Number(commits.headers.get("x-total-count")) >= 2, `commits X-Total-Count ${commits.headers.get("x-total-count")}`);
  const { data: file } = await api.repos.repoGetContents(owner, name, "fast.txt", { ref: "feature" });
  expect(file.type === "file" && Buffer.from(file.content, "base64").toString() === "faster\n", JSON.stringify(file));

  step = "create an issue";
  const { data: issue, status: created } = await api.repos.issueCreateIssue(owner, name, {
    title: "The build is slow",
    body: "It takes **ten** minutes.",
  });
  expect(created === 201 && issue.number >= 1 && issue.state === "open", JSON.stringify(issue));
  expect(issue.user.login === user && issue.comments === 0 && Number.isInteger(issue.id), "author, comment count, id");

  step = "comment";
  const { data: comment, status: commented } = await api.repos.issueCreateComment(owner, name, issue.number, {
    body: "Seen it too.",
  });
  expect(commented === 201 && Number.isInteger(comment.id) && comment.body === "Seen it too.", JSON.stringify(comment));
  const { data: comments } = await api.repos.issueGetComments(owner, name, issue.number);
  expect(comments.length === 1 && comments[0].id === comment.id && comments[0].user.login === user, "the comment is listed");

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
  expect(
    (await status(() => api.repos.issueCreateLabel(owner, name, { name: "SLOW", color: "#000000" }))) === 409,
    "a second label of the name is a 409"
  );

  step = "list issues";
  const { data: open } = await api.repos.issueListIssues(owner, name, { type: "issues" });
  expect(open.length === 1 && open[0].labels[0].id === label.id && open[0].comments === 1, JSON.stringify(open));
  const { data: byLabel } = await api.repos.issueListIssues(owner, name, { labels: "slow" });
  expect(byLabel.length === 1 && byLabel[0].number === issue.number, "the label filter");

  step = "close the issue";
  const { data: closed } = await api.repos.issueEditIssue(owner, name, issue.number, {
    state: "closed",
  });
  expect(closed.state === "closed" && closed.closed_at, JSON.stringify(closed));
  const { data: stillOpen } = await api.repos.issueListIssues(owner, name, { type: "issues" });
  expect(stillOpen.length === 0, "a closed issue is not in the open list");
  const { data: closedList } = await api.repos.issueListIssues(owner, name, { type: "issues", state: "closed" });
  expect(closedList.length === 1 && closedList[0].number === issue.number, "the closed list");

  step = "page 45 issues by 20";
  for (let i = 0; i < 45; i++) {
    await api.repos.issueCreateIssue(owner, name, { title: `issue ${i}` });
  }
  const pages = [];
  for (let page = 1; page <= 3; page++) {
    const r = await api.repos.issueListIssues(owner, name, { type: "issues", page, limit: 20 });
    expect(r.headers.get("x-total-count") === "45", `page ${page}: X-Total-Count ${r.headers.get("x-total-count")}`);
    const link = r.headers.get("link") || "";
    expect(link.includes('rel="first"') && link.includes('rel="last"'), `page ${page}: Link ${link}`);
    expect(link.includes("page=3&limit=20"), `page ${page}: the last page in Link: ${link}`);
    expect(page === 3 ? !link.includes('rel="next"') : link.includes('rel="next"'), `page ${page}: next in ${link}`);
    expect(page === 1 ? !link.includes('rel="prev"') : link.includes('rel="prev"'), `page ${page}: prev in ${link}`);
    expect(r.data.length === (page === 3 ? 5 : 20), `page ${page} holds ${r.data.length}`);
    pages.push(...r.data.map((i) => i.number));
  }
  expect(pages.length === 45 && new Set(pages).size === 45, `45 different issues over 3 pages: ${pages}`);
  const { data: past } = await api.repos.issueListIssues(owner, name, { type: "issues", page: 4, limit: 20 });
  expect(Array.isArray(past) && past.length === 0, "a page past the end is []");

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
  expect(/^[0-9a-f]{40}$/.test(shown.merge_base) && shown.merge_base !== shown.head.sha, `merge_base ${shown.merge_base}`);
  const asText = async (url) => {
    const r = await fetch(url, { headers: { Authorization: `token ${token}` } });
    expect(r.status === 200, `${url}: ${r.status}`);
    return r.text();
  };
  const diff = await asText(shown.diff_url);
  expect(diff.startsWith("diff --git") && diff.includes("+faster"), `diff_url ${shown.diff_url}: ${diff}`);
  const patch = await asText(shown.patch_url);
  expect(patch.startsWith("From ") && patch.includes("Subject: [PATCH") && patch.includes("+faster"), `patch_url ${shown.patch_url}: ${patch}`);
  expect(shown.diff_url === `${shown.html_url}.diff` && shown.patch_url === `${shown.html_url}.patch`, "Gitea's link shapes");
  // The API's own path to them (gitea-js: repoDownloadPullDiffOrPatch).
  const viaApi = await asText(`${base}/api/v1/repos/${owner}/${name}/pulls/${pull.number}.diff`);
  expect(viaApi === diff, `the API's .diff: ${viaApi}`);

  step = "label the pull request and list pull requests by label id";
  await api.repos.issueAddLabel(owner, name, pull.number, { labels: [label.id] });
  const { data: pullsLabelled } = await api.repos.repoListPullRequests(owner, name, { labels: [label.id] });
  expect(pullsLabelled.length === 1 && pullsLabelled[0].number === pull.number, `by label id: ${JSON.stringify(pullsLabelled)}`);
  const { data: unlabelled } = await api.repos.repoListPullRequests(owner, name, { labels: [label.id + 1000] });
  expect(unlabelled.length === 0, `an id no label has matches nothing: ${JSON.stringify(unlabelled)}`);

  step = "merge the pull request";
  const merged = await api.repos.repoMergePullRequest(owner, name, pull.number, { Do: "merge" });
  expect(merged.status === 200, `merge answered ${merged.status}`);
  const { data: after } = await api.repos.repoGetPullRequest(owner, name, pull.number);
  expect(after.merged === true && /^[0-9a-f]{40}$/.test(after.merge_commit_sha), JSON.stringify(after));
  expect(after.state === "closed" && after.merged_by.login === user, "merged by the user, closed");
  expect(after.head.sha === shown.head.sha && after.base.sha === shown.base.sha, `the sides as merged: ${JSON.stringify(after)}`);
  console.log(`pull ${after.number} ${after.head.sha}`);

  step = "a missing repo";
  expect((await status(() => api.repos.repoGet(owner, "no-such-repo"))) === 404, "a missing repo is a 404");
  console.log("ok");
} catch (e) {
  const detail = e && e.error ? JSON.stringify(e.error) : e && e.stack ? e.stack : String(e);
  console.error(`step "${step}" failed: ${e && e.status ? e.status + " " : ""}${detail}`);
  process.exit(1);
}
