;;; emacs_plain_eglot_prefill_e2e.el --- eglot without synconfroute.el: the server infers the rest  -*- lexical-binding: t; -*-

;; Drives Emacs in batch mode with plain eglot (no synconfroute.el: nothing sends
;; `synconfroute/cursor'), as Helix or LSP4IJ users have it: Enter at the end of a line
;; sends a didChange; the server takes the end of that change as the cursor and, once the
;; typing rests, prefills the embedded model's prompt there; the completion eglot then
;; asks for (completion-at-point) reuses it.  The control asks at once after the edit.
;; What it saw goes to $SYNCONFROUTE_E2E_RESULT (JSON) for tests/test_editors.py.

;;; Code:

(require 'json)
(require 'eglot)

(let ((cmd (json-parse-string (getenv "SYNCONFROUTE_E2E_CMD") :array-type 'list)))
  (setq eglot-server-programs (list (cons '(python-mode :language-id "python") cmd))))

(load (expand-file-name "e2e_lib.el" (file-name-directory load-file-name)) nil t)
(setq e2e-wait-seconds 90
      e2e-poll-seconds 0.25)

(defun e2e-enter-then-ask (file line rest)
  "Open FILE, Enter at the end of LINE (eglot sends the didChange), rest REST seconds
(nil: until a prefill ran), ask with `completion-at-point' there; the share of its prompt
tokens the KV cache held, and the prefills."
  (let ((w0 (e2e-open-managed file)))
    (goto-char (point-min))
    (forward-line (1- line))
    (end-of-line)
    (execute-kbd-macro (kbd "RET"))
    ;; eglot sends changes from an idle timer (batch Emacs is never idle): send now.
    (funcall 'eglot--signal-textDocument/didChange)
    (e2e-prompt-reuse w0 rest "a prefill where the edit ended"
                      (lambda ()
                        ;; eglot's completion table asks textDocument/completion when it
                        ;; is first read.
                        (let ((capf (eglot-completion-at-point)))
                          (all-completions "" (nth 2 capf)))))))

(condition-case err
    (progn
      (e2e-put "at_once" (e2e-enter-then-ask (getenv "SYNCONFROUTE_E2E_COLD") 61 0))
      (e2e-put "rested" (e2e-enter-then-ask (getenv "SYNCONFROUTE_E2E_FILE") 61 nil))
      (e2e-finish nil))
  (error (e2e-finish (error-message-string err))))

;;; emacs_plain_eglot_prefill_e2e.el ends here
