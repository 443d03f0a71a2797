// isomorphic-git as a client of vole's smart HTTP, for the integration tests.
// usage: node isogit_client.mjs clone URL DIR | push DIR URL REF
import fs from 'node:fs';
import git from 'isomorphic-git';
import http from 'isomorphic-git/http/node';

const [command, a, b, c] = process.argv.slice(2);
try {
  if (command === 'clone') {
    await git.clone({ fs, http, dir: b, url: a, singleBranch: false });
  } else if (command === 'push') {
    const result = await git.push({ fs, http, dir: a, url: b, ref: c, remoteRef: c });
    if (!result.ok) throw new Error(`push refused: ${JSON.stringify(result)}`);
  } else {
    throw new Error(`unknown command ${command}`);
  }
  console.log(`${command} ok`);
} catch (e) {
  console.error(`isomorphic-git ${command} failed: ${e.stack || e}`);
  process.exit(1);
}
