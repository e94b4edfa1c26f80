;;; emacs_ghost_e2e.el --- ghost text, partial accept, route data in Emacs  -*- lexical-binding: t; -*-

;; Drives Emacs in batch mode like a user: in a buffer managed by eglot and the real
;; server, Enter on a function's first line asks for ghost text (the idle timer typing set
;; is run as Emacs runs it when idle: batch Emacs is never idle), M-<right> takes its next
;; word, C-M-<right> its next line, C-g and any other command hide it, TAB takes it all;
;; the mode line and eldoc show the route the server sent as data.  What it saw goes to
;; $SYNCONFROUTE_E2E_RESULT (JSON) for tests/test_editors.py to judge.

;;; Code:

(require 'json)
(require 'subr-x)
(add-to-list 'load-path (expand-file-name "editors/emacs" (getenv "SYNCONFROUTE_E2E_ROOT")))
(require 'synconfroute)

(setq synconfroute-command (json-parse-string (getenv "SYNCONFROUTE_E2E_CMD") :array-type 'list)
      synconfroute-settings '(:routing (:threshold -0.7)))
(synconfroute-setup)

(load (expand-file-name "e2e_lib.el" (file-name-directory load-file-name)) nil t)
(setq e2e-wait-seconds 20
      e2e-poll-seconds 0.02)

(defun e2e-ghost ()
  "The ghost text as displayed: the after-string of our overlay at point, or nil."
  (cl-loop for ov in (overlays-in (point-min) (point-max))
           when (overlay-get ov 'synconfroute)
           return (let ((s (overlay-get ov 'after-string)))
                    (list (cons "text" (substring-no-properties s))
                          (cons "at_point" (= (overlay-start ov) (point)))
                          (cons "face" (symbol-name (get-text-property 0 'face s)))
                          (cons "cursor" (and (get-text-property 0 'cursor s) t))))))

(defun e2e-line (&optional n)
  (save-excursion
    (when n (goto-char (point-min)) (forward-line (1- n)))
    (buffer-substring-no-properties (line-beginning-position) (line-end-position))))

(defun e2e-keys (keys)
  (setq e2e-step (format "keys %s" keys))
  (execute-kbd-macro (kbd keys)))

(defun e2e-eldoc ()
  (let* ((shown nil)
         (eldoc-display-functions (list (lambda (docs _interactive) (setq shown docs)))))
    (eldoc-print-current-symbol-info t)
    (e2e-wait "eldoc" (lambda () shown) 10)
    (mapconcat #'car shown "\n")))

(condition-case err
    (progn
      (find-file (getenv "SYNCONFROUTE_E2E_FILE"))
      (call-interactively #'eglot)
      (e2e-wait "the buffer to be managed" #'eglot-managed-p)
      (let ((server (eglot-current-server)))
        ;; A: Enter at the end of "def add(a, b):"; typing set the idle timer.
        (goto-char (point-min))
        (end-of-line)
        (e2e-keys "RET")
        (e2e-put "timer_set" (and synconfroute--timer t))
        (timer-event-handler synconfroute--timer) ; as Emacs does once idle
        (e2e-put "ghost" (e2e-wait "the ghost text" #'e2e-ghost))
        (e2e-put "line_while_shown" (e2e-line 2))
        (e2e-keys "M-<right>")
        (e2e-put "after_word" (list (cons "line" (e2e-line 2))
                                    (cons "ghost" (cdr (assoc "text" (e2e-ghost))))))
        (e2e-keys "C-M-<right>")
        (e2e-put "after_line" (list (cons "line" (e2e-line 2))
                                    (cons "ghost" (cdr (assoc "text" (e2e-ghost))))))
        (e2e-keys "C-M-<right>")
        (e2e-put "after_next_line" (list (cons "lines" (list (e2e-line 1) (e2e-line 2)
                                                             (e2e-line 3) (e2e-line 4)))
                                         (cons "ghost" (e2e-ghost))))
        ;; The card covers all the parts taken: from where the first one went.
        (let ((from (car synconfroute--last)))
          (e2e-put "card_from" (list (line-number-at-pos from)
                                     (save-excursion (goto-char from) (current-column)))))
        (e2e-put "route_string" (synconfroute-route-string))
        ;; What the mode line shows (batch Emacs formats no :eval, so it is run here).
        (e2e-put "mode_line" (and (member synconfroute--mode-line mode-line-misc-info)
                                  (eval (cadr synconfroute--mode-line) t)))
        (goto-char (point-min))
        (forward-line 1)
        (e2e-put "eldoc" (e2e-eldoc))

        ;; B: the empty body of sub(): asked for with M-x; C-g, then another command,
        ;; hide it; TAB takes it all.
        (goto-char (point-max))
        (skip-chars-backward "\n")
        (e2e-put "last_line" (e2e-line))
        (call-interactively #'synconfroute-inline)
        (e2e-wait "the ghost text on request" #'e2e-ghost)
        (e2e-put "tab_binding_shown" (symbol-name (key-binding (kbd "TAB"))))
        (e2e-keys "C-g")
        (e2e-put "ghost_after_c_g" (e2e-ghost))
        (call-interactively #'synconfroute-inline)
        (e2e-wait "the ghost text again" #'e2e-ghost)
        (e2e-keys "<left>")
        (e2e-put "ghost_after_left" (e2e-ghost))
        (e2e-keys "<right>")
        (e2e-put "tab_binding_hidden" (symbol-name (key-binding (kbd "TAB"))))
        (call-interactively #'synconfroute-inline)
        (e2e-wait "the ghost text a third time" #'e2e-ghost)
        (e2e-keys "TAB")
        (e2e-put "lines_after_tab"
                 (split-string (buffer-substring-no-properties (point-min) (point-max)) "\n"))
        (e2e-put "ghost_after_tab" (e2e-ghost))
        (let ((status (e2e-wait "both accepts to reach the server"
                                (lambda ()
                                  (let ((st (synconfroute-status)))
                                    (and (>= (plist-get st :accepted) 2) st))))))
          (e2e-put "status" (list (cons "accepted" (plist-get status :accepted))
                                  (cons "local" (plist-get (plist-get status :routes) :local)))))
        (e2e-put "last_route" synconfroute-last-route)
        (setq e2e-step "shutdown")
        (eglot-shutdown server))
      (e2e-finish nil))
  (t (e2e-finish (error-message-string err))))  ; quit too

;;; emacs_ghost_e2e.el ends here
