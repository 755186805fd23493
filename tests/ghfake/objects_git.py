"""Render checks, statuses, commits, contents, permissions and rate limits (mixin of Renderer)."""

from __future__ import annotations

import base64
import re
import time
from typing import TYPE_CHECKING, Any

from . import gitops
from .state import LEGACY_PERMISSION, CheckRun, Repo, Status, User

if TYPE_CHECKING:
    from .factories import Factory
    from .state import State


NOREPLY = re.compile(r"(?P<id>\d+)\+(?P<login>[^@]+)@users\.noreply\.github\.com")


class GitRenderMixin:
    state: State
    f: Factory

    def user(self, u: User, schema: str = "simple-user") -> dict[str, Any]:  # provided by Renderer
        raise NotImplementedError

    def repo(self, r: Repo, schema: str = "full-repository") -> dict[str, Any]:  # provided by Renderer
        raise NotImplementedError

    # ------------------------------------------------------------------ checks
    def check_run(self, cr: CheckRun) -> dict[str, Any]:
        url = self.f.api(f"repos/{cr.repo.full_name}/check-runs/{cr.id}")
        out = {"title": None, "summary": None, "text": None, **cr.output}
        annotations = out.pop("annotations", [])
        out.pop("images", None)
        out["annotations_count"] = len(annotations)
        out["annotations_url"] = url + "/annotations"
        app = self.f.skeleton("integration")
        app.update(
            id=1,
            slug=cr.app_slug,
            node_id="A_1",
            owner=self.user(cr.repo.owner),
            name=cr.app_slug,
            description=None,
            external_url=self.f.html("apps/" + cr.app_slug),
            html_url=self.f.html("apps/" + cr.app_slug),
            permissions={"checks": "write", "contents": "write", "pull_requests": "write"},
            events=[],
        )
        prs = [
            {
                "id": p.id,
                "number": p.number,
                "url": self.f.api(f"repos/{p.base.full_name}/pulls/{p.number}"),
                "head": {
                    "ref": p.head_ref,
                    "sha": cr.head_sha,
                    "repo": {
                        "id": p.head.id,
                        "url": self.f.api(f"repos/{p.head.full_name}"),
                        "name": p.head.name,
                    },
                },
                "base": {
                    "ref": p.base_ref,
                    "sha": self.state.base_sha(p),
                    "repo": {
                        "id": p.base.id,
                        "url": self.f.api(f"repos/{p.base.full_name}"),
                        "name": p.base.name,
                    },
                },
            }
            for p in self.state.pulls_for_sha(cr.repo, cr.head_sha)
        ]
        return self.f.skeleton(
            "check-run",
            id=cr.id,
            node_id=f"CR_{cr.id}",
            head_sha=cr.head_sha,
            name=cr.name,
            url=url,
            html_url=self.f.html(f"{cr.repo.full_name}/runs/{cr.id}"),
            details_url=cr.details_url,
            status=cr.status,
            conclusion=cr.conclusion,
            started_at=cr.started_at,
            completed_at=cr.completed_at,
            external_id=cr.external_id,
            check_suite={"id": cr.id + 5_000_000},
            output=out,
            app=app,
            pull_requests=prs,
        )

    def status(self, s: Status) -> dict[str, Any]:
        return self.f.skeleton(
            "status",
            url=self.f.api(f"repos/{s.repo.full_name}/statuses/{s.sha}"),
            avatar_url=None,
            id=s.id,
            node_id=f"SC_{s.id}",
            state=s.state,
            description=s.description,
            target_url=s.target_url,
            context=s.context,
            created_at=s.created_at,
            updated_at=s.created_at,
            creator=self.user(s.creator),
        )

    # ------------------------------------------------------------------ git data
    def commit(self, repo: Repo, sha: str, with_files: bool = True) -> dict[str, Any]:
        info = gitops.commit_info(repo.git_dir, sha)
        api = self.f.api(f"repos/{repo.full_name}")

        def person(name: str, email: str) -> User | None:
            # GitHub links a commit to an account by its email; <id>+<login>@users.noreply.github.com
            # names the account itself (with the wrong id it links to no one)
            linked = NOREPLY.fullmatch(email)
            if linked:
                u = self.state.user(linked["login"])
                return u if u.id == int(linked["id"]) else None
            return self.state.users.get(name.lower())  # the fake's own commits: <login>@users.noreply.example

        author = person(info.author_name, info.author_email)
        committer = person(info.committer_name, info.committer_email)
        obj = self.f.skeleton(
            "commit",
            url=f"{api}/commits/{sha}",
            sha=sha,
            node_id=f"C_{sha[:12]}",
            html_url=self.f.html(f"{repo.full_name}/commit/{sha}"),
            comments_url=f"{api}/commits/{sha}/comments",
            author=self.user(author) if author else None,
            committer=self.user(committer) if committer else None,
            parents=[
                {
                    "sha": p,
                    "url": f"{api}/commits/{p}",
                    "html_url": self.f.html(f"{repo.full_name}/commit/{p}"),
                }
                for p in info.parents
            ],
            commit={
                "url": f"{api}/git/commits/{sha}",
                "author": {"name": info.author_name, "email": info.author_email, "date": info.author_date},
                "committer": {
                    "name": info.committer_name,
                    "email": info.committer_email,
                    "date": info.committer_date,
                },
                "message": info.message,
                "comment_count": 0,
                "tree": {"sha": info.tree, "url": f"{api}/git/trees/{info.tree}"},
            },
        )
        if with_files:
            parent = info.parents[0] if info.parents else gitops.EMPTY_TREE
            entries = gitops.diff_entries(repo.git_dir, parent, sha)
            files = []
            for e in entries:
                d = {k: e[k] for k in ("filename", "status", "additions", "deletions", "changes")}
                d.update(
                    sha=e["blob_sha"],
                    blob_url=self.f.html(f"{repo.full_name}/blob/{sha}/{e['filename']}"),
                    raw_url=self.f.html(f"{repo.full_name}/raw/{sha}/{e['filename']}"),
                    contents_url=f"{api}/contents/{e['filename']}?ref={sha}",
                )
                d.update({k: e[k] for k in ("patch", "previous_filename") if k in e})
                files.append(d)
            adds = sum(f["additions"] for f in files)
            dels = sum(f["deletions"] for f in files)
            obj.update(files=files, stats={"additions": adds, "deletions": dels, "total": adds + dels})
        return obj

    def content(
        self, repo: Repo, ref: str, kind: str, path: str, sha: str, size: int, data: bytes | None
    ) -> dict:
        api = self.f.api(f"repos/{repo.full_name}/contents/{path}?ref={ref}")
        git_url = self.f.api(f"repos/{repo.full_name}/git/{'blobs' if kind == 'file' else 'trees'}/{sha}")
        html = self.f.html(f"{repo.full_name}/{'blob' if kind == 'file' else 'tree'}/{ref}/{path}")
        obj = {
            "type": kind,
            "name": path.rsplit("/", 1)[-1],
            "path": path,
            "sha": sha,
            "size": size if kind == "file" else 0,
            "url": api,
            "git_url": git_url,
            "html_url": html,
            "download_url": self.f.html(f"{repo.full_name}/raw/{ref}/{path}") if kind == "file" else None,
            "_links": {"self": api, "git": git_url, "html": html},
        }
        if data is not None:
            obj["content"] = base64.encodebytes(data).decode("ascii")
            obj["encoding"] = "base64"
        return obj

    def permission(self, repo: Repo, user: User, role: str | None) -> dict[str, Any]:
        role = role or "read"
        collab = self.user(user, "collaborator")
        collab["role_name"] = role
        collab["permissions"] = {
            "pull": True,
            "triage": role in ("triage", "write", "maintain", "admin"),
            "push": role in ("write", "maintain", "admin"),
            "maintain": role in ("maintain", "admin"),
            "admin": role == "admin",
        }
        return {"permission": LEGACY_PERMISSION.get(role, "none"), "role_name": role, "user": collab}

    def rate_limit(self, remaining: int, limit: int = 5000) -> dict[str, Any]:
        reset = int(time.time()) + 3600
        core = {"limit": limit, "remaining": remaining, "reset": reset, "used": limit - remaining}
        obj = self.f.skeleton("rate-limit-overview")
        obj["rate"] = core
        obj["resources"] = {
            "core": core,
            "search": {"limit": 30, "remaining": 30, "reset": reset, "used": 0},
            "graphql": {"limit": 5000, "remaining": 5000, "reset": reset, "used": 0},
        }
        return obj
