// Where the Client keeps the session it resumes: {sessionId, resumeToken}
// in memory, and in a Storage (e.g. sessionStorage) when given one, so that
// a reload resumes too. The resume token is a secret: it is never logged.

export class ResumeStore {
  #storage;
  #key;
  #saved = null;

  constructor(storage, key) {
    this.#storage = storage;
    this.#key = key;
  }

  /** The session to resume, or null. */
  load() {
    if (this.#saved !== null) return this.#saved;
    try {
      const saved = JSON.parse(this.#storage?.getItem(this.#key) ?? "null");
      if (typeof saved?.sessionId === "string" && typeof saved?.resumeToken === "string") {
        this.#saved = { sessionId: saved.sessionId, resumeToken: saved.resumeToken };
      }
    } catch {
      // unreadable or disabled storage: start a new session
    }
    return this.#saved;
  }

  save(sessionId, resumeToken) {
    if (typeof sessionId !== "string" || typeof resumeToken !== "string") return;
    this.#saved = { sessionId, resumeToken };
    try {
      this.#storage?.setItem(this.#key, JSON.stringify(this.#saved));
    } catch {
      // storage full or disabled: the session lasts as long as this page
    }
  }

  forget() {
    this.#saved = null;
    try {
      this.#storage?.removeItem(this.#key);
    } catch {
      // nothing stored
    }
  }
}
