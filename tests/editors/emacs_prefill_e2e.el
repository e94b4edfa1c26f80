;;; emacs_prefill_e2e.el --- the resting cursor is reported, the prompt prefilled  -*- lexical-binding: t; -*-

;; Drives Emacs in batch mode: a file opened under eglot and the real server (embedded
;; SmolLM2), the cursor moved to a line's end by a command; the idle timer that move set is
;; run as Emacs runs it once idle (batch Emacs is never idle): it sends
;; `synconfroute/cursor', the server prefills there, and the completion asked there
;; (M-x synconfroute-inline) reuses the prompt from the KV cache.  The control does the
;; same in another file with `synconfroute-cursor-delay' nil.  What it saw goes to
;; $SYNCONFROUTE_E2E_RESULT (JSON) for tests/test_editors.py to judge.

;;; Code:

(require 'json)
(require 'subr-x)
(add-to-list 'load-path (expand-file-name "editors/emacs" (getenv "SYNCONFROUTE_E2E_ROOT")))
(require 'synconfroute)

(setq synconfroute-command (json-parse-string (getenv "SYNCONFROUTE_E2E_CMD") :array-type 'list)
      synconfroute-inline-auto nil)
(synconfroute-setup)

(load (expand-file-name "e2e_lib.el" (file-name-directory load-file-name)) nil t)
(setq e2e-wait-seconds 90
      e2e-poll-seconds 0.25)

(defun e2e-ask-after-open (file line rest)
  "Open FILE, go to the end of LINE, rest REST seconds (nil: until a prefill ran),
ask; the share of the completion's prompt tokens the KV cache held, and the prefills."
  (let ((w0 (e2e-open-managed file)))
    (goto-char (point-min))
    (forward-line (1- line))
    (execute-kbd-macro (kbd "C-e"))     ; a command: post-command-hook runs
    (when synconfroute--cursor-timer    ; as Emacs does once idle
      (timer-event-handler synconfroute--cursor-timer))
    (e2e-prompt-reuse w0 rest "a prefill at the resting cursor"
                      (lambda () (call-interactively #'synconfroute-inline)))))

(condition-case err
    (progn
      (let ((synconfroute-cursor-delay nil))
        (e2e-put "off" (e2e-ask-after-open (getenv "SYNCONFROUTE_E2E_COLD") 61 3)))
      (e2e-put "on" (e2e-ask-after-open (getenv "SYNCONFROUTE_E2E_FILE") 61 nil))
      (e2e-finish nil))
  (error (e2e-finish (error-message-string err))))

;;; emacs_prefill_e2e.el ends here
