"""Render state objects as REST JSON (schema-valid, URLs on the fake's base URL)."""

from __future__ import annotations

from typing import Any

from .factories import Factory
from .objects_git import GitRenderMixin
from .state import Comment, Pull, Reaction, Repo, Review, State, User

_REPO_URL_TEMPLATES = {
    "archive_url": "/{archive_format}{/ref}",
    "assignees_url": "/assignees{/user}",
    "blobs_url": "/git/blobs{/sha}",
    "branches_url": "/branches{/branch}",
    "collaborators_url": "/collaborators{/collaborator}",
    "comments_url": "/comments{/number}",
    "commits_url": "/commits{/sha}",
    "compare_url": "/compare/{base}...{head}",
    "contents_url": "/contents/{+path}",
    "contributors_url": "/contributors",
    "deployments_url": "/deployments",
    "downloads_url": "/downloads",
    "events_url": "/events",
    "forks_url": "/forks",
    "git_commits_url": "/git/commits{/sha}",
    "git_refs_url": "/git/refs{/sha}",
    "git_tags_url": "/git/tags{/sha}",
    "hooks_url": "/hooks",
    "issue_comment_url": "/issues/comments{/number}",
    "issue_events_url": "/issues/events{/number}",
    "issues_url": "/issues{/number}",
    "keys_url": "/keys{/key_id}",
    "labels_url": "/labels{/name}",
    "languages_url": "/languages",
    "merges_url": "/merges",
    "milestones_url": "/milestones{/number}",
    "notifications_url": "/notifications{?since,all,participating}",
    "pulls_url": "/pulls{/number}",
    "releases_url": "/releases{/id}",
    "stargazers_url": "/stargazers",
    "statuses_url": "/statuses/{sha}",
    "subscribers_url": "/subscribers",
    "subscription_url": "/subscription",
    "tags_url": "/tags",
    "teams_url": "/teams",
    "trees_url": "/git/trees{/sha}",
}


class Renderer(GitRenderMixin):
    def __init__(self, state: State, factory: Factory):
        self.state = state
        self.f = factory

    # ------------------------------------------------------------------ people
    def user(self, u: User, schema: str = "simple-user") -> dict[str, Any]:
        api = self.f.api(f"users/{u.login}")
        return self.f.skeleton(
            schema,
            login=u.login,
            id=u.id,
            node_id=f"U_{u.id}",
            avatar_url=self.f.api(f"_avatars/{u.id}"),
            gravatar_id="",
            url=api,
            html_url=self.f.html(u.login),
            followers_url=api + "/followers",
            following_url=api + "/following{/other_user}",
            gists_url=api + "/gists{/gist_id}",
            starred_url=api + "/starred{/owner}{/repo}",
            subscriptions_url=api + "/subscriptions",
            organizations_url=api + "/orgs",
            repos_url=api + "/repos",
            events_url=api + "/events{/privacy}",
            received_events_url=api + "/received_events",
            type=u.type,
            site_admin=False,
        )

    def public_user(self, u: User) -> dict[str, Any]:
        obj = self.user(u, "public-user")
        obj.update(
            user_view_type="public",
            name=u.name,
            email=u.email,
            created_at="2020-01-01T00:00:00Z",
            updated_at="2020-01-01T00:00:00Z",
        )
        return obj

    # ------------------------------------------------------------------ repos
    def repo(self, r: Repo, schema: str = "full-repository") -> dict[str, Any]:
        api = self.f.api(f"repos/{r.full_name}")
        obj = self.f.skeleton(schema)
        obj.update(
            {k: api + v for k, v in _REPO_URL_TEMPLATES.items() if k in obj or schema != "minimal-repository"}
        )
        clone = r.git_dir.resolve().as_uri()
        pushed = self.state.rev(r.git_dir, f"refs/heads/{r.default_branch}")
        obj.update(
            id=r.id,
            node_id=f"R_{r.id}",
            name=r.name,
            full_name=r.full_name,
            owner=self.user(r.owner),
            private=r.private,
            visibility="private" if r.private else "public",
            fork=r.parent is not None,
            url=api,
            html_url=self.f.html(r.full_name),
            clone_url=clone,
            git_url=clone,
            ssh_url=clone,
            svn_url=self.f.html(r.full_name),
            default_branch=r.default_branch,
            created_at=r.created_at,
            updated_at=r.created_at,
            pushed_at=r.created_at if pushed else None,
            description=None,
            homepage=None,
            language=None,
            mirror_url=None,
            license=None,
            has_issues=True,
            has_projects=False,
            has_wiki=False,
            has_pages=False,
            has_downloads=False,
            has_discussions=False,
            archived=False,
            disabled=False,
        )
        open_count = sum(1 for p in self.state.pulls.values() if p.base is r and p.state == "open")
        for k in ("open_issues", "open_issues_count"):
            obj[k] = open_count
        if schema == "full-repository":
            obj["network_count"] = obj["subscribers_count"] = 0
            obj["permissions"] = {"admin": True, "maintain": True, "push": True, "triage": True, "pull": True}
            if r.parent is not None:
                obj["parent"] = self.repo(r.parent, "repository")
                obj["source"] = self.repo(
                    r.parent, "repository"
                )  # its own dict: payloads are rewritten in place
        return obj

    # ------------------------------------------------------------------ pulls
    def _pr_urls(self, pr: Pull, head_sha: str) -> dict[str, Any]:
        base = f"repos/{pr.base.full_name}"
        url = self.f.api(f"{base}/pulls/{pr.number}")
        html = self.f.html(f"{pr.base.full_name}/pull/{pr.number}")
        issue = self.f.api(f"{base}/issues/{pr.number}")
        return {
            "url": url,
            "html_url": html,
            "diff_url": html + ".diff",
            "patch_url": html + ".patch",
            "issue_url": issue,
            "commits_url": url + "/commits",
            "review_comments_url": url + "/comments",
            "review_comment_url": self.f.api(f"{base}/pulls/comments{{/number}}"),
            "comments_url": issue + "/comments",
            "statuses_url": self.f.api(f"{base}/statuses/{head_sha}"),
        }

    def _branch(self, repo: Repo, ref: str, sha: str) -> dict[str, Any]:
        return {
            "label": f"{repo.owner.login}:{ref}",
            "ref": ref,
            "sha": sha,
            "user": self.user(repo.owner),
            "repo": self.repo(repo, "repository"),
        }

    def pull(self, pr: Pull, simple: bool = False) -> dict[str, Any]:
        head_sha = self.state.head_sha(pr)
        base_sha = self.state.base_sha(pr)
        urls = self._pr_urls(pr, head_sha)
        links = {
            k: {"href": urls[v]}
            for k, v in (
                ("self", "url"),
                ("html", "html_url"),
                ("issue", "issue_url"),
                ("comments", "comments_url"),
                ("review_comments", "review_comments_url"),
                ("review_comment", "review_comment_url"),
                ("commits", "commits_url"),
                ("statuses", "statuses_url"),
            )
        }
        obj = self.f.skeleton("pull-request-simple" if simple else "pull-request", **urls)
        obj.update(
            id=pr.id,
            node_id=f"PR_{pr.id}",
            number=pr.number,
            state=pr.state,
            locked=False,
            title=pr.title,
            body=pr.body,
            user=self.user(pr.user),
            labels=[],
            milestone=None,
            assignee=None,
            assignees=[],
            requested_reviewers=[],
            requested_teams=[],
            created_at=pr.created_at,
            updated_at=pr.updated_at,
            closed_at=pr.closed_at,
            merged_at=None,
            merge_commit_sha=None,
            draft=pr.draft,
            head=self._branch(pr.head, pr.head_ref, head_sha),
            base=self._branch(pr.base, pr.base_ref, base_sha),
            _links=links,
            author_association=self.state.author_association(pr.base, pr.user.login),
            auto_merge=None,
        )
        if not simple:
            files = self.state.pull_files(pr)
            obj.update(
                merged=False,
                mergeable=True,
                rebaseable=True,
                mergeable_state="clean",
                merged_by=None,
                comments=len(self.state.issue_comments(pr.base, pr.number)),
                review_comments=sum(
                    len(r.comments)
                    for r in self.state.reviews.values()
                    if r.repo is pr.base and r.number == pr.number
                ),
                maintainer_can_modify=pr.maintainer_can_modify,
                commits=len(self.state.pull_commits(pr)),
                additions=sum(f["additions"] for f in files),
                deletions=sum(f["deletions"] for f in files),
                changed_files=len(files),
            )
        return obj

    def diff_entry(self, pr: Pull, e: dict[str, Any]) -> dict[str, Any]:
        head = self.state.head_sha(pr)
        repo = pr.base.full_name
        out = {
            "sha": e["blob_sha"],
            "filename": e["filename"],
            "status": e["status"],
            "additions": e["additions"],
            "deletions": e["deletions"],
            "changes": e["changes"],
            "blob_url": self.f.html(f"{repo}/blob/{head}/{e['filename']}"),
            "raw_url": self.f.html(f"{repo}/raw/{head}/{e['filename']}"),
            "contents_url": self.f.api(f"repos/{repo}/contents/{e['filename']}?ref={head}"),
        }
        for k in ("patch", "previous_filename"):
            if k in e:
                out[k] = e[k]
        return out

    def issue_for_pull(self, pr: Pull) -> dict[str, Any]:
        urls = self._pr_urls(pr, self.state.head_sha(pr))
        issue = urls["issue_url"]
        n = len(self.state.issue_comments(pr.base, pr.number))
        return self.f.skeleton(
            "issue",
            id=pr.id + 1_000_000,
            node_id=f"I_{pr.id}",
            number=pr.number,
            url=issue,
            html_url=urls["html_url"],
            repository_url=self.f.api(f"repos/{pr.base.full_name}"),
            labels_url=issue + "/labels{/name}",
            comments_url=issue + "/comments",
            events_url=issue + "/events",
            state=pr.state,
            title=pr.title,
            body=pr.body,
            user=self.user(pr.user),
            labels=[],
            assignee=None,
            assignees=[],
            milestone=None,
            locked=False,
            comments=n,
            closed_at=pr.closed_at,
            created_at=pr.created_at,
            updated_at=pr.updated_at,
            draft=pr.draft,
            author_association=self.state.author_association(pr.base, pr.user.login),
            pull_request={
                "url": urls["url"],
                "html_url": urls["html_url"],
                "diff_url": urls["diff_url"],
                "patch_url": urls["patch_url"],
                "merged_at": None,
            },
        )

    # ------------------------------------------------------------------ comments
    def comment(self, c: Comment) -> dict[str, Any]:
        repo = c.repo.full_name
        url = self.f.api(f"repos/{repo}/issues/comments/{c.id}")
        return self.f.skeleton(
            "issue-comment",
            id=c.id,
            node_id=f"IC_{c.id}",
            url=url,
            html_url=self.f.html(f"{repo}/pull/{c.issue_number}#issuecomment-{c.id}"),
            issue_url=self.f.api(f"repos/{repo}/issues/{c.issue_number}"),
            body=c.body,
            user=self.user(c.user),
            created_at=c.created_at,
            updated_at=c.updated_at,
            author_association=self.state.author_association(c.repo, c.user.login),
            reactions=self.reaction_rollup(url + "/reactions", c.reactions),
        )

    def reaction_rollup(self, url: str, reactions: list[Reaction]) -> dict[str, Any]:
        counts = {k: 0 for k in ("+1", "-1", "laugh", "confused", "heart", "hooray", "eyes", "rocket")}
        for r in reactions:
            counts[r.content] += 1
        return {"url": url, "total_count": len(reactions), **counts}

    def reaction(self, r: Reaction) -> dict[str, Any]:
        return self.f.skeleton(
            "reaction",
            id=r.id,
            node_id=f"REA_{r.id}",
            user=self.user(r.user),
            content=r.content,
            created_at=r.created_at,
        )

    def review(self, rv: Review) -> dict[str, Any]:
        pr_url = self.f.api(f"repos/{rv.repo.full_name}/pulls/{rv.number}")
        html = self.f.html(f"{rv.repo.full_name}/pull/{rv.number}#pullrequestreview-{rv.id}")
        obj = self.f.skeleton(
            "pull-request-review",
            id=rv.id,
            node_id=f"PRR_{rv.id}",
            user=self.user(rv.user),
            body=rv.body,
            state=rv.state,
            commit_id=rv.commit_id,
            html_url=html,
            pull_request_url=pr_url,
            _links={"html": {"href": html}, "pull_request": {"href": pr_url}},
            author_association=self.state.author_association(rv.repo, rv.user.login),
        )
        if rv.submitted_at:
            obj["submitted_at"] = rv.submitted_at
        return obj
