import assert from "node:assert/strict";
import { test } from "node:test";
import { subgroup } from "../src/distributed/scoped-store.js";
import { InvalidArgumentError } from "../src/errors.js";

test("newGroup's rule: members get sorted ranks and agreeing names; others get nothing; bad lists are refused", () => {
  const made = new Map<string, number>();
  const parent = { name: "world", ranks: [0, 1, 2, 3], self: 2 };
  assert.deepEqual(subgroup(parent, [2, 0], made), { name: "world/g0-2.1", ranks: [0, 2] });
  assert.deepEqual(
    subgroup(parent, [0, 2], made),
    { name: "world/g0-2.2", ranks: [0, 2] },
    "a second group of the same ranks",
  );
  assert.equal(subgroup(parent, [0, 1], made), undefined, "not a member");
  assert.equal(made.has("world/g0-1"), false, "a non-member counts nothing");
  for (const bad of [[0, 0], [4], [1.5]])
    assert.throws(() => subgroup(parent, bad, made), InvalidArgumentError);
});
